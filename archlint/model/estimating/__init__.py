"""Time on a device archlint does not have: the static estimate from a device spec, its roofline and family calibration."""
