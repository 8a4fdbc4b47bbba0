"""The scheduler: places each pending pod on a node through the scheduling framework."""
