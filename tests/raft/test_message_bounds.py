"""Numbers in Raft messages are bounded as Kafka's are: ids and epochs int32, the rest int64.
A message outside them is not well formed, so the core drops it and adopts nothing."""
from raft.messages import INT32_MAX, INT64_MAX, FetchRequest, VoteRequest, well_formed


def test_ids_and_epochs_are_int32():
    assert well_formed(VoteRequest("c", INT32_MAX, 2, 10, 1))
    assert not well_formed(VoteRequest("c", INT32_MAX + 1, 2, 10, 1))
    assert not well_formed(VoteRequest("c", 5, 2**40, 10, 1))
    assert not well_formed(VoteRequest("c", -2, 2, 10, 1))


def test_other_numbers_are_int64():
    assert well_formed(FetchRequest("c", 1, 3, INT64_MAX, 2, 0, 0))
    assert not well_formed(FetchRequest("c", 1, 3, INT64_MAX + 1, 2, 0, 0))
