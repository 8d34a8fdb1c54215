//! ConfigMaps: a namespace's `kube-root-ca.crt` is put back once deleted or changed, as every
//! namespace holds one ([`super::namespace::KeptInEveryNamespace`]).

pub(super) use super::namespace::KeptInEveryNamespace as ConfigMap;
