//! The pieces of the download benchmark: the repository, the hub serving it, the plugin process
//! under measurement and the kubelet driving it, and the peer programs it is compared with.

pub mod hub;
pub mod kubelet;
pub mod peers;
pub mod plugin;
pub mod repo;
