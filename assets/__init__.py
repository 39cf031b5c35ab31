"""Shipped robot configurations and scenes (installed as softsnake.assets)."""
