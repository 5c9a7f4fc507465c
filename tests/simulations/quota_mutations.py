"""Deliberate client-quota bugs patched into the real node code, for the mutation tests.

Each mutation is a function taking pytest's `monkeypatch`; the full-cluster simulation (its
quota churn and quota checker) must find each within a bounded number of seeds. Nothing here
is a switch in node code: the bug exists only while the test patches it in.
"""
from __future__ import annotations

import broker.quotas.enforcement
import broker.quotas.quota_manager
from metadata.client_quotas import resolve


def broker_client_id_quota_outranks_user_quota(monkeypatch) -> None:
    """A broker applies a client-id quota before the user's (KIP-55's precedence has the user
    levels first): the images stay equal to the log, the quotas enforced do not."""

    def client_id_first(quotas, user, client_id, key):
        shared = resolve({e: q for e, q in quotas.items() if all(p.entity_type == "client-id" for p in e)},
                         user, client_id, key)
        return shared if shared.bound is not None else resolve(quotas, user, client_id, key)

    monkeypatch.setattr(broker.quotas.quota_manager, "resolve", client_id_first)


def broker_quota_view_not_updated(monkeypatch) -> None:
    """A broker keeps the quotas of the first image it enforced and never takes a newer one's
    (a cache keyed wrongly): after quotas change, and across controller failovers, it enforces
    old quotas while its image already holds the new ones."""

    def quotas(self):
        if not hasattr(self, "_first_quotas"):
            self._first_quotas = self._image().client_quotas
        return self._first_quotas

    monkeypatch.setattr(broker.quotas.enforcement.ClientQuotas, "quotas", quotas)


QUOTA_MUTATIONS = {
    "broker_client_id_quota_outranks_user_quota": broker_client_id_quota_outranks_user_quota,
    "broker_quota_view_not_updated": broker_quota_view_not_updated,
}
