"""Vine robots: scene files, the obstacle-interaction planner and the dynamic simulator."""
