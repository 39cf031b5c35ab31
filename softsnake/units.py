"""Unit conversions at the user-facing edge.

Everything inside softsnake is SI (m, kg, s, Pa, rad). Pressures given in psi on the command
line or in config files are converted once, here.
"""

PSI_TO_PA = 6894.757
"""Pascals per pound-force per square inch."""


def psi_to_pa(psi):
    """Convert a pressure from psi to Pa (works on scalars and numpy arrays)."""
    return psi * PSI_TO_PA


def pa_to_psi(pa):
    """Convert a pressure from Pa to psi (works on scalars and numpy arrays)."""
    return pa / PSI_TO_PA
