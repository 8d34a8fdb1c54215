-- A TokenRequest bound to a Pod (spec.boundObjectRef): the Pod's name and uid (the token dies
-- with that Pod) and the node it runs on, as kube-apiserver puts them in the token's claims.
-- NULL for tokens bound to nothing.
ALTER TABLE service_account_tokens ADD COLUMN bound_pod_name TEXT;
ALTER TABLE service_account_tokens ADD COLUMN bound_pod_uid TEXT;
ALTER TABLE service_account_tokens ADD COLUMN bound_node_name TEXT;
ALTER TABLE service_account_tokens ADD COLUMN bound_node_uid TEXT;
