"""S3 reads against raw clients on moto's and SeaweedFS's servers."""
