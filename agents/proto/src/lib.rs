//! Vendored protobuf definitions (kubelet device plugin v1beta1, pod resources v1, CSI) compiled
//! with tonic. The first agent that speaks one of these protocols adds its `.proto` here.
