"""The active controller fences a broker whose controller connection closed, after a grace."""
from metadata.controller.brokers import fence_closed_broker
from metadata.controller.connection_grace import ConnectionGrace
from metadata.controller.heartbeats import BrokerHeartbeatManager
from tests.metadata.helpers import apply, cluster, with_topic


def setup():
    img = with_topic(cluster(3), "t", 3, 3)
    hb = BrokerHeartbeatManager()
    hb.activate(img, 0.0)
    for b in (1, 2, 3):
        hb.set_fenced(b, False)
    return img, hb, ConnectionGrace(0.5)


def test_a_closed_connection_fences_its_broker_once_the_grace_ran_out():
    img, hb, grace = setup()
    grace.heard("c1", 1, img.brokers[1].epoch)
    grace.heard("c2", 2, img.brokers[2].epoch)
    assert grace.closed("c1", 1.0) == 1
    assert fence_closed_broker(img, grace, hb, 1.4) == ([], None)  # still within the grace
    batches, fenced = fence_closed_broker(img, grace, hb, 1.5)
    img = apply(img, batches)
    assert fenced == 1 and img.brokers[1].fenced and not img.brokers[2].fenced
    assert all(1 not in p.isr and p.leader != 1 for p in img.topic("t").partitions.values())
    assert fence_closed_broker(img, grace, hb, 2.0) == ([], None)  # once only


def test_a_heartbeat_within_the_grace_cancels_it():
    img, hb, grace = setup()
    grace.heard("c1", 1, img.brokers[1].epoch)
    grace.closed("c1", 1.0)
    grace.heard("c9", 1, img.brokers[1].epoch)  # reconnected and heartbeated
    assert fence_closed_broker(img, grace, hb, 5.0) == ([], None)
    # its new connection closing starts a new grace
    assert grace.closed("c9", 6.0) == 1
    assert fence_closed_broker(img, grace, hb, 6.5)[1] == 1


def test_an_older_connection_closing_after_a_newer_one_carried_the_broker_is_ignored():
    img, hb, grace = setup()
    grace.heard("old", 1, img.brokers[1].epoch)
    grace.heard("new", 1, img.brokers[1].epoch)
    assert grace.closed("old", 1.0) is None  # the close was only seen after the new heartbeat
    assert fence_closed_broker(img, grace, hb, 9.0) == ([], None)


def test_a_late_heartbeat_on_a_left_connection_does_not_fence_over_the_open_one():
    # The broker's heartbeat on "old" was retransmitted and arrives after the one on "new",
    # then "old" closes (the broker had left it): its lease is on "new", still open.
    img, hb, grace = setup()
    epoch = img.brokers[1].epoch
    grace.heard("new", 1, epoch)
    grace.heard("old", 1, epoch)
    assert grace.closed("old", 1.0) is None
    assert fence_closed_broker(img, grace, hb, 9.0) == ([], None)
    assert grace.closed("new", 10.0) == 1  # the last open one closing still fences
    assert fence_closed_broker(img, grace, hb, 10.5)[1] == 1


def test_an_open_connection_of_an_older_epoch_does_not_hold_off_the_fence():
    img, hb, grace = setup()
    epoch = img.brokers[1].epoch
    grace.heard("before", 1, epoch - 1)  # the previous incarnation's, its close not yet seen
    grace.heard("now", 1, epoch)
    assert grace.closed("now", 1.0) == 1
    assert fence_closed_broker(img, grace, hb, 1.5)[1] == 1


def test_a_connection_that_carried_no_broker_or_another_incarnation_fences_nothing():
    img, hb, grace = setup()
    assert grace.closed("admin", 1.0) is None  # a tool's connection: no broker on it
    grace.heard("c1", 1, img.brokers[1].epoch - 1)  # an older epoch than the registration
    grace.closed("c1", 1.0)
    assert fence_closed_broker(img, grace, hb, 9.0) == ([], None)


def test_reset_forgets_the_connections_of_an_earlier_term():
    img, hb, grace = setup()
    grace.heard("c1", 1, img.brokers[1].epoch)
    grace.closed("c1", 1.0)
    grace.reset()
    assert fence_closed_broker(img, grace, hb, 9.0) == ([], None)
    grace.heard("c2", 2, img.brokers[2].epoch)
    grace.reset()
    assert grace.closed("c2", 10.0) is None


def test_expected_brokers_are_fenced_unless_they_heartbeat_and_withdrawing_keeps_closed_ones():
    img, hb, grace = setup()
    epochs = {b: img.brokers[b].epoch for b in (1, 2, 3)}
    grace.expect(epochs, 1.0)  # a controller activated after its predecessor's death
    grace.heard("c2", 2, epochs[2])  # 2 heartbeated in time
    grace.heard("c3", 3, epochs[3])
    grace.closed("c3", 1.2)  # and 3 too, but its connection closed since: a close deadline
    assert fence_closed_broker(img, grace, hb, 1.4) == ([], None)
    assert fence_closed_broker(img, grace, hb, 1.5)[1] == 1
    assert fence_closed_broker(img, grace, hb, 1.6) == ([], None)
    assert grace.withdraw_expected() == []  # 1's deadline was used, 2's and 3's met
    grace.expect({1: epochs[1]}, 2.0)
    assert grace.withdraw_expected() == [1]  # the predecessor answered after all
    assert fence_closed_broker(img, grace, hb, 9.0)[1] == 3  # the closed connection still counts
    assert fence_closed_broker(img, grace, hb, 9.0) == ([], None)
