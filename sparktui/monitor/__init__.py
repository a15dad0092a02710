"""The monitor core (``core.Monitor``): the one UI-free object every consumer of a fleet drives."""
