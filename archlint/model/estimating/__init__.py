"""Time on a device archlint does not have: the static estimate from a device spec and family calibration
(the roofline peaks of the device at hand are measured in archlint.model.timing.roofline)."""
