"""Dataset generation against dd, fio and DLIO."""
