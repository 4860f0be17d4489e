"""Generated protobuf code (see proto/); regenerate with grpc_tools.protoc."""
