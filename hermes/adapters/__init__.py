"""Platform adapter actors and their wire protocols."""
