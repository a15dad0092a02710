"""What the tests share: real servers (sshd, Prometheus), fixture fleets, deterministic UI data."""
