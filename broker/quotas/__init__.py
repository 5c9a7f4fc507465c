"""Client quotas (KIP-13/55/124/219/599): rates measured per entity over Kafka's sampled
windows, throttle times computed as Kafka's, and the seam the server applies them at."""
