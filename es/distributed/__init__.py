"""Milestone 3: distributed ES through Redis (see the course repository's ``protocol.py`` for what travels)."""
