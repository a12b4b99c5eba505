"""Registers every command module on the app (each module adds its commands on import)."""
