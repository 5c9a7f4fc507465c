"""ACL admin APIs: DescribeAcls, CreateAcls, DeleteAcls (v1+ carry the resource pattern type)."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, INT16, INT32, INT8, STRING

__all__ = [
    "DescribeAclsRequest", "DescribeAclsResponse", "CreateAclsRequest", "CreateAclsResponse",
    "DeleteAclsRequest", "DeleteAclsResponse",
]

LITERAL = 3  # PatternType: what a v0 request means


def _filter_fields():
    return [
        F("resource_type_filter", INT8),
        F("resource_name_filter", STRING, nullable="0+"),
        F("pattern_type_filter", INT8, "1+", default=LITERAL),
        F("principal_filter", STRING, nullable="0+"),
        F("host_filter", STRING, nullable="0+"),
        F("operation", INT8),
        F("permission_type", INT8),
    ]


DescribeAclsRequest = request(29, "DescribeAcls", "0-3", flexible="2+", fields=_filter_fields())

DescribeAclsResponse = response(29, "DescribeAcls", "0-3", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("resources", ArrayOf("DescribeAclsResource",
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("pattern_type", INT8, "1+", default=LITERAL),
        F("acls", ArrayOf("AclDescription",
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        )),
    )),
])

CreateAclsRequest = request(30, "CreateAcls", "0-3", flexible="2+", fields=[
    F("creations", ArrayOf("AclCreation",
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("resource_pattern_type", INT8, "1+", default=LITERAL),
        F("principal", STRING),
        F("host", STRING),
        F("operation", INT8),
        F("permission_type", INT8),
    )),
])

CreateAclsResponse = response(30, "CreateAcls", "0-3", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("results", ArrayOf("AclCreationResult",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
    )),
])

DeleteAclsRequest = request(31, "DeleteAcls", "0-3", flexible="2+", fields=[
    F("filters", ArrayOf("DeleteAclsFilter", *_filter_fields())),
])

DeleteAclsResponse = response(31, "DeleteAcls", "0-3", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("filter_results", ArrayOf("DeleteAclsFilterResult",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("matching_acls", ArrayOf("DeleteAclsMatchingAcl",
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, "1+", default=LITERAL),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        )),
    )),
])
