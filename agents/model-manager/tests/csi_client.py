"""The kubelet's side of the CSI socket, as an independent client: Python grpcio with stubs
generated from the same vendored csi.proto. One call per run; prints the outcome as JSON.

usage: csi_client.py <stubs-dir> <socket> <Service.Method> <request-json>
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from csi.v1 import csi_pb2, csi_pb2_grpc  # noqa: E402

_, _, socket, call, body = sys.argv
service, method = call.split(".")
# grpcio would send the socket path as :authority, which is not a valid HTTP/2 authority.
channel = grpc.insecure_channel("unix://" + socket, options=[("grpc.default_authority", "localhost")])
stub = getattr(csi_pb2_grpc, service + "Stub")(channel)
request = json_format.Parse(body, getattr(csi_pb2, method + "Request")())
try:
    response = getattr(stub, method)(request, timeout=30)
    print(json.dumps({"code": "OK", "response": json_format.MessageToDict(response)}))
except grpc.RpcError as e:
    print(json.dumps({"code": e.code().name, "details": e.details()}))
