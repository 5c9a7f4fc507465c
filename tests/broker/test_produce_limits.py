"""handlers.produce: a topic's produce settings are resolved once per metadata image."""
from types import SimpleNamespace

from broker.handlers import produce


class FakeBroker:  # weak-referenceable, as a Broker is
    def __init__(self, metadata, static):
        self.metadata, self.static = metadata, static


def test_settings_are_resolved_once_per_image_and_afresh_for_a_new_one(monkeypatch):
    calls = []

    def resolve(image, topic, name, static):
        calls.append((image.version, topic, name))
        return image.version * 10 + len(topic)

    monkeypatch.setattr(produce, "effective_topic_value", resolve)
    broker = FakeBroker(SimpleNamespace(image=SimpleNamespace(version=1)), {})
    assert produce._topic_limits(broker, "t")["min.insync.replicas"] == 11
    assert produce._topic_limits(broker, "t")["min.insync.replicas"] == 11  # another request
    assert produce._topic_limits(broker, "tt")["min.insync.replicas"] == 12
    assert calls == [(1, "t", "min.insync.replicas"), (1, "tt", "min.insync.replicas")]
    limits = produce._topic_limits(broker, "t")
    broker.metadata.image = SimpleNamespace(version=2)  # a config change is a new image
    assert limits["min.insync.replicas"] == 11  # a request keeps the image it started with
    assert produce._topic_limits(broker, "t")["min.insync.replicas"] == 21
    assert calls[-1] == (2, "t", "min.insync.replicas")
    other = FakeBroker(broker.metadata, {"min.insync.replicas": "2"})
    produce._topic_limits(other, "t")["min.insync.replicas"]
    assert len(calls) == 4  # each broker has its own
