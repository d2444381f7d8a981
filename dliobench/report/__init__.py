"""Result files (the JSON schema), console summaries, and later tables and plots."""
