"""End-to-end tests against real `python -m raftkafka` processes on loopback."""
