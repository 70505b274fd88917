"""The actuator and the embedded cluster: scaling commands become resources."""
