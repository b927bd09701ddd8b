"""The safety layer: what a secret looks like and how it is kept from leaving Carrier."""
