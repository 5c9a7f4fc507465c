"""Controller RPCs → controller operations → responses.

`ControllerRequests.handle(request)` serves one metadata.controller.rpc request: it turns
the message into a pure controller function over the speculative image, submits it to the
ControllerService, and builds the response (NOT_CONTROLLER with a leader hint when this
node is not the active controller, UNKNOWN_SERVER_ERROR when the operation hit a fault and
the controller renounced). It returns None for messages that are not controller
requests, so the listener can offer them to another handler.
"""
from __future__ import annotations

import dataclasses
import logging
import random
from typing import Any

from metadata.acls import AclBinding, AclFilter, acl_fields
from metadata.controller import rpc
from metadata.controller.acls import create_acls, delete_acls
from metadata.controller.alter_partition import AlterPartitionItem, alter_partition
from metadata.controller.client_quotas import QuotaAlteration, QuotaOp, alter_client_quotas
from metadata.controller.brokers import (
    BrokerRegistrationRequest as Registration, HeartbeatRequest, broker_heartbeat,
    register_broker, unregister_broker,
)
from metadata.controller.dynamic_configs import (
    AlterOp, alter_configs, describe_configs, incremental_alter_configs,
)
from metadata.controller.elect_leaders import ElectionType, elect_leaders
from metadata.controller.gate import admit, check_forwarder
from metadata.controller.mutation_quota import MutationQuotas, MutationRequester
from metadata.controller.producer_ids import allocate_producer_ids
from metadata.controller.reassignment import (
    alter_partition_reassignments, list_partition_reassignments,
)
from metadata.controller.replication import batches as split_batches
from metadata.controller.service import ControllerFault, ControllerService, NotControllerError
from metadata.controller.scram import ScramDeletion, ScramUpsertion, alter_user_scram_credentials
from metadata.controller.topics import (
    CreatableTopic, NewPartitions, create_partitions, create_topics, delete_topics,
)
from metadata.errors import ApiError
from metadata.records import Endpoint
from metrics.registry import MetricsRegistry
from metrics.sampled_stats import QuotaWindow
from wire.error_codes import ErrorCode

__all__ = ["ControllerRequests"]

log = logging.getLogger("raftkafka.metadata.controller")


def _error_reply(request, code: ErrorCode, message: str | None):
    """The response to `request` carrying one top-level error (and its message where the
    response has a field for it)."""
    response = rpc.CONTROLLER_REQUESTS[type(request)]
    has_message = any(f.name == "message" for f in dataclasses.fields(response))
    return response(int(code), None, **({"message": message} if has_message else {}))


class ControllerRequests:
    def __init__(self, service: ControllerService, *, rng: random.Random, cluster_id: str,
                 metrics: MetricsRegistry | None = None):
        self.service = service
        self.cluster_id = cluster_id
        self.rng = rng
        # Each answer's top-level error (NONE too) per RPC, as the brokers count theirs
        # (raftkafka_request_errors_total): NOT_CONTROLLER, STALE_BROKER_EPOCH, ...
        self.errors = (metrics or MetricsRegistry()).counter("raftkafka_controller_request_errors_total")
        # this controller's only (as Kafka's): not replicated
        self.mutation_quotas = MutationQuotas(QuotaWindow.of_settings(service.static))
        self._handlers = {
            rpc.BrokerRegistrationRequest: self._register,
            rpc.BrokerHeartbeatRequest: self._heartbeat,
            rpc.AlterPartitionRequest: self._alter_partition,
            rpc.AllocateProducerIdsRequest: self._producer_ids,
            rpc.CreateTopicsRequest: self._create_topics,
            rpc.DeleteTopicsRequest: self._delete_topics,
            rpc.CreatePartitionsRequest: self._create_partitions,
            rpc.AlterConfigsRequest: self._alter_configs,
            rpc.IncrementalAlterConfigsRequest: self._incremental_alter_configs,
            rpc.DescribeConfigsRequest: self._describe_configs,
            rpc.ElectLeadersRequest: self._elect_leaders,
            rpc.DescribeClusterRequest: self._describe_cluster,
            rpc.CreateAclsRequest: self._create_acls,
            rpc.DeleteAclsRequest: self._delete_acls,
            rpc.AlterUserScramCredentialsRequest: self._alter_scram,
            rpc.AlterPartitionReassignmentsRequest: self._alter_reassignments,
            rpc.ListPartitionReassignmentsRequest: self._list_reassignments,
            rpc.UnregisterBrokerRequest: self._unregister,
            rpc.AlterClientQuotasRequest: self._alter_client_quotas,
        }

    async def handle(self, request, connection=None) -> Any | None:
        """`connection`: a key of the connection it came on (connection_grace), if known."""
        handler = self._handlers.get(type(request))
        if handler is None:
            return None
        response = await self._answer(handler, request, connection)
        self.errors.labels(type(request).__name__.removesuffix("Request"), ErrorCode.name_of(response.error)).inc()
        return response

    async def _answer(self, handler, request, connection):
        response_type = rpc.CONTROLLER_REQUESTS[type(request)]
        refused = admit(request, self.cluster_id)
        if refused is not None:
            log.warning("refused %s: %s", type(request).__name__, refused.message)
            return _error_reply(request, refused.code, refused.message)
        try:
            if handler in (self._register, self._heartbeat):
                return await handler(request, connection)
            return await handler(request)
        except NotControllerError as e:
            return response_type(int(ErrorCode.NOT_CONTROLLER), e.leader_id)
        except ApiError as e:  # the whole request refused (too large, timed out, not a broker)
            return _error_reply(request, e.code, e.message)
        except ControllerFault as e:  # logged where it happened; the controller renounced
            return _error_reply(request, ErrorCode.UNKNOWN_SERVER_ERROR, f"controller fault: {e}")

    async def _submit(self, name, fn, request=None):
        """Run `fn` on the controller; an admin `request` is checked and bounded there."""
        if not isinstance(request, rpc.ADMIN_REQUESTS):
            return await self.service.submit(name, fn)

        def checked(image, next_offset, now):
            check_forwarder(image, request)
            return fn(image, next_offset, now)

        timeout_ms = request.timeout_ms
        deadline = self.service.env.now() + timeout_ms / 1000 if timeout_ms > 0 else None
        return await self.service.submit(name, checked, admin=True, deadline=deadline)

    def _me(self) -> int:
        return self.service.node_id

    # ----------------------------------------------------------------- brokers
    async def _register(self, req: rpc.BrokerRegistrationRequest, connection=None):
        reg = Registration(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id,
            endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol)
                            for e in req.endpoints),
            rack=req.rack, log_dirs=tuple(req.log_dirs),
            previous_broker_epoch=req.previous_broker_epoch,
            previous_incarnation_id=req.previous_incarnation_id)
        svc = self.service

        def op(image, next_offset, now):
            out = register_broker(image, reg, next_offset=next_offset, heartbeats=svc.heartbeats,
                                  now=now, static=svc.static)
            if out[1].error == ErrorCode.NONE:
                svc.grace.heard(connection, req.broker_id, out[1].broker_epoch)
            return out

        result, _ = await self._submit("BrokerRegistration", op)
        return rpc.BrokerRegistrationResponse(int(result.error), self._me(), result.broker_epoch,
                                              result.message)

    async def _heartbeat(self, req: rpc.BrokerHeartbeatRequest, connection=None):
        hb = HeartbeatRequest(req.broker_id, req.broker_epoch, req.current_metadata_offset,
                              req.want_fence, req.want_shutdown)
        svc = self.service

        def op(image, next_offset, now):
            out = broker_heartbeat(image, hb, heartbeats=svc.heartbeats, now=now,
                                   next_offset=next_offset, static=svc.static)
            if out[1].error == ErrorCode.NONE:
                svc.grace.heard(connection, req.broker_id, req.broker_epoch)
            return out

        r, _ = await self._submit("BrokerHeartbeat", op)
        return rpc.BrokerHeartbeatResponse(int(r.error), self._me(), r.is_caught_up, r.is_fenced,
                                           r.should_shutdown)

    async def _unregister(self, req: rpc.UnregisterBrokerRequest):
        svc = self.service

        def op(image, next_offset, now):
            batches, error, message = unregister_broker(image, req.unregistered_id, svc.heartbeats)
            return batches, (error, message)

        (error, message), offset = await self._submit("UnregisterBroker", op, req)
        return rpc.UnregisterBrokerResponse(int(error), self._me(), message, offset)

    async def _alter_partition(self, req: rpc.AlterPartitionRequest):
        items = [AlterPartitionItem(i.topic_id, i.partition_id, i.leader_epoch, i.partition_epoch,
                                    tuple(i.new_isr), i.new_isr_broker_epochs,
                                    i.leader_recovery_state) for i in req.items]
        static = self.service.static

        def op(image, next_offset, now):
            records, error, results = alter_partition(image, req.broker_id, req.broker_epoch,
                                                      items, static=static)
            return [records], (error, results)

        (error, results), offset = await self._submit("AlterPartition", op)
        return rpc.AlterPartitionResponse(int(error), self._me(), offset, [
            rpc.AlterPartitionResultInfo(r.topic_id, r.partition_id, int(r.error), r.leader,
                                         r.leader_epoch, list(r.isr), r.partition_epoch,
                                         r.leader_recovery_state) for r in results])

    async def _producer_ids(self, req: rpc.AllocateProducerIdsRequest):
        def op(image, next_offset, now):
            records, block = allocate_producer_ids(image, req.broker_id, req.broker_epoch)
            return [records], block

        block, _ = await self._submit("AllocateProducerIds", op)
        return rpc.AllocateProducerIdsResponse(int(block.error), self._me(), block.first_id,
                                               block.size)

    # ------------------------------------------------------------------ topics
    async def _create_topics(self, req: rpc.CreateTopicsRequest):
        topics = [CreatableTopic(t.name, t.num_partitions, t.replication_factor,
                                 {p: tuple(r) for p, r in t.assignments.items()}
                                 if t.assignments else None, dict(t.configs))
                  for t in req.topics]
        svc, rng = self.service, self.rng

        def op(image, next_offset, now):
            quota = self._mutation_quota(image, req, now)
            records, results = create_topics(image, topics, rng=rng, validate_only=req.validate_only,
                                             static=svc.static, quota=quota)
            return [records], (results, quota.finish())

        (results, throttle_ms), offset = await self._submit("CreateTopics", op, req)
        return rpc.CreateTopicsResponse(0, self._me(), offset, [
            rpc.CreateTopicResultInfo(r.name, int(r.error), r.message, r.topic_id,
                                      r.num_partitions, r.replication_factor) for r in results],
            throttle_time_ms=throttle_ms)

    def _mutation_quota(self, image, req, now: float):
        who = None if req.user is None else MutationRequester(req.user, req.client_id, req.strict_quota)
        return self.mutation_quotas.for_request(image.client_quotas, who, now)

    async def _delete_topics(self, req: rpc.DeleteTopicsRequest):
        static = self.service.static

        def op(image, next_offset, now):
            quota = self._mutation_quota(image, req, now)
            records, results = delete_topics(image, names=req.names, topic_ids=req.topic_ids,
                                             static=static, quota=quota)
            return [records], (results, quota.finish())

        (results, throttle_ms), offset = await self._submit("DeleteTopics", op, req)
        return rpc.DeleteTopicsResponse(0, self._me(), offset, [
            rpc.DeleteTopicResultInfo(r.name, r.topic_id, int(r.error), r.message)
            for r in results], throttle_time_ms=throttle_ms)

    async def _create_partitions(self, req: rpc.CreatePartitionsRequest):
        wanted = [NewPartitions(t.name, t.count, t.assignments) for t in req.topics]

        def op(image, next_offset, now):
            quota = self._mutation_quota(image, req, now)
            records, results = create_partitions(image, wanted, validate_only=req.validate_only, quota=quota)
            return [records], (results, quota.finish())

        (results, throttle_ms), offset = await self._submit("CreatePartitions", op, req)
        return rpc.CreatePartitionsResponse(0, self._me(), offset, [
            rpc.PartitionsResultInfo(name, int(code), msg)
            for name, (code, msg) in results.items()], throttle_time_ms=throttle_ms)

    # ----------------------------------------------------------------- configs
    async def _alter_configs(self, req: rpc.AlterConfigsRequest):
        resources = {(r.resource_type, r.resource_name): {e.name: e.value for e in r.entries}
                     for r in req.resources}

        def op(image, next_offset, now):
            records, results = alter_configs(image, resources, req.validate_only)
            return [records], results

        return await self._configs_response("AlterConfigs", op, req)

    async def _incremental_alter_configs(self, req: rpc.IncrementalAlterConfigsRequest):
        resources, refused = {}, []
        for r in req.resources:
            key = (r.resource_type, r.resource_name)
            if all(o.op in AlterOp._value2member_map_ for o in r.ops):
                resources[key] = [(o.name, AlterOp(o.op), o.value) for o in r.ops]
            else:  # an unknown operation fails its resource only, as in Kafka
                refused.append(rpc.ConfigResultInfo(*key, int(ErrorCode.INVALID_REQUEST),
                                                    "Unknown config operation"))
        static = self.service.static

        def op(image, next_offset, now):
            records, results = incremental_alter_configs(image, resources, req.validate_only,
                                                         static)
            return [records], results

        reply = await self._configs_response("IncrementalAlterConfigs", op, req)
        results = sorted(reply.results + refused, key=lambda r: (r.resource_type, r.resource_name))
        return rpc.AlterConfigsResponse(reply.error, reply.leader_id, reply.offset, results)

    async def _configs_response(self, name, op, req):
        results, offset = await self._submit(name, op, req)
        return rpc.AlterConfigsResponse(0, self._me(), offset, [
            rpc.ConfigResultInfo(rt, rn, int(e.code), e.message)
            for (rt, rn), e in sorted(results.items())])

    async def _describe_configs(self, req: rpc.DescribeConfigsRequest):
        static = self.service.static

        def op(image, next_offset, now):
            return [], describe_configs(image, (req.resource_type, req.resource_name), req.keys,
                                        include_synonyms=req.include_synonyms, static=static)

        (error, configs), _ = await self._submit("DescribeConfigs", op)
        return rpc.DescribeConfigsResponse(int(error.code), self._me(), error.message, [
            rpc.DescribedConfigInfo(c.name, c.value, c.read_only, int(c.source), c.sensitive,
                                    int(c.type)) for c in configs])

    async def _elect_leaders(self, req: rpc.ElectLeadersRequest):
        try:
            kind = ElectionType(req.election_type)
        except ValueError:
            return rpc.ElectLeadersResponse(int(ErrorCode.INVALID_REQUEST), self._me())
        static = self.service.static

        def op(image, next_offset, now):
            records, results = elect_leaders(image, kind, req.partitions, static=static)
            return split_batches(records), results

        results, offset = await self._submit("ElectLeaders", op, req)
        return rpc.ElectLeadersResponse(0, self._me(), offset, [
            rpc.ElectionResultInfo(t, p, int(code)) for (t, p), code in sorted(results.items())])

    async def _alter_reassignments(self, req: rpc.AlterPartitionReassignmentsRequest):
        wanted = [(r.topic, r.partition, None if r.replicas is None else tuple(r.replicas))
                  for r in req.reassignments]
        static = self.service.static

        def op(image, next_offset, now):
            records, results = alter_partition_reassignments(image, wanted, static=static)
            return split_batches(records), results

        results, offset = await self._submit("AlterPartitionReassignments", op, req)
        return rpc.AlterPartitionReassignmentsResponse(0, self._me(), offset, [
            rpc.ReassignmentResultInfo(t, p, int(r.error), r.message)
            for (t, p), r in results.items()])

    async def _list_reassignments(self, req: rpc.ListPartitionReassignmentsRequest):
        wanted = None if req.topics is None else [(t, list(pids)) for t, pids in req.topics]

        def op(image, next_offset, now):  # a read: answered once what it shows has committed
            return [], list_partition_reassignments(image, wanted)

        ongoing, _ = await self._submit("ListPartitionReassignments", op)
        return rpc.ListPartitionReassignmentsResponse(0, self._me(), [
            rpc.OngoingReassignmentInfo(o.topic, o.partition, list(o.replicas), list(o.adding),
                                        list(o.removing)) for o in ongoing])

    async def _alter_scram(self, req: rpc.AlterUserScramCredentialsRequest):
        deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
        upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                      for u in req.upsertions]

        def op(image, next_offset, now):
            records, results = alter_user_scram_credentials(image, deletions, upsertions)
            return [records], results

        results, offset = await self._submit("AlterUserScramCredentials", op, req)
        return rpc.AlterUserScramCredentialsResponse(0, self._me(), offset, [
            rpc.ScramResultInfo(user, int(code), message) for user, (code, message) in results.items()])

    async def _alter_client_quotas(self, req: rpc.AlterClientQuotasRequest):
        changes = [QuotaAlteration(tuple((t, n) for t, n in a.entity),
                                   tuple(QuotaOp(o.key, o.value, o.remove) for o in a.ops))
                   for a in req.alterations]

        def op(image, next_offset, now):
            records, results = alter_client_quotas(image, changes, req.validate_only)
            return [records], results  # one batch: a request's quotas commit together

        results, offset = await self._submit("AlterClientQuotas", op, req)
        return rpc.AlterClientQuotasResponse(0, self._me(), offset, [
            rpc.QuotaResultInfo(int(code), message) for code, message in results])

    async def _describe_cluster(self, req: rpc.DescribeClusterRequest):
        # A read of the speculative image: answered once what it shows has committed.
        image, _ = await self._submit("DescribeCluster", lambda image, off, now: ([], image))
        return rpc.DescribeClusterResponse(0, self._me(), image.offset, [
            rpc.BrokerInfo(b, reg.epoch, reg.fenced, reg.in_controlled_shutdown,
                           self.service.heartbeats.metadata_offset(b))
            for b, reg in sorted(image.brokers.items())], [
            rpc.PartitionInfo(t.name, p, part.leader, part.leader_epoch, part.partition_epoch,
                              list(part.replicas), list(part.isr))
            for t, p, part in image.iter_partitions()])

    # -------------------------------------------------------------------- acls
    async def _create_acls(self, req: rpc.CreateAclsRequest):
        bindings = [AclBinding(*acl_fields(a)) for a in req.creations]
        rng = self.rng

        def op(image, next_offset, now):
            records, results = create_acls(image, bindings, rng=rng)
            return [records], results  # one batch: a request's ACLs commit together

        results, offset = await self._submit("CreateAcls", op, req)
        return rpc.CreateAclsResponse(0, self._me(), offset,
                                      [rpc.AclResultInfo(int(r.error), r.message) for r in results])

    async def _delete_acls(self, req: rpc.DeleteAclsRequest):
        filters = [AclFilter(*acl_fields(f)) for f in req.filters]

        def op(image, next_offset, now):
            records, results = delete_acls(image, filters)
            return [records], results

        results, offset = await self._submit("DeleteAcls", op, req)
        return rpc.DeleteAclsResponse(0, self._me(), offset, [
            rpc.DeleteAclsResultInfo(int(r.error), r.message, [rpc.AclInfo(*b) for b in r.deleted])
            for r in results])
