-- Which objects name which owners (metadata.ownerReferences[].uid), so that deleting an owner
-- finds its dependents without scanning every object.
CREATE TABLE owner_refs (
    cluster   TEXT NOT NULL,
    owner_uid TEXT NOT NULL,
    grp       TEXT NOT NULL,
    resource  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    PRIMARY KEY (cluster, owner_uid, grp, resource, namespace, name)
) WITHOUT ROWID;
CREATE INDEX owner_refs_by_dependent ON owner_refs (cluster, grp, resource, namespace, name);

INSERT OR IGNORE INTO owner_refs (cluster, owner_uid, grp, resource, namespace, name)
SELECT o.cluster, json_extract(r.value, '$.uid'), o.grp, o.resource, o.namespace, o.name
FROM objects o, json_each(o.body, '$.metadata.ownerReferences') r
WHERE json_extract(r.value, '$.uid') IS NOT NULL;
