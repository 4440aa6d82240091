"""Spark session handling and Arrow <-> Spark conversion."""
