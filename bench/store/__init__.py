"""The client side and the records: the strict transport, the record store, the redactor."""
