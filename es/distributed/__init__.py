"""Milestone 3: distributed ES through Redis (see ``protocol.py`` for what travels)."""
