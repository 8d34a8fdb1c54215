//! A kube-runtime `Controller` with a finalizer, run to completion against the gateway.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use gpustack_api::devices::Devices;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{
        Controller,
        controller::Action,
        finalizer::{self, Event as Finalizer},
        watcher,
    },
};
use serde_json::json;

use crate::{
    crud::install_crds,
    harness::{DEADLINE, start},
};
use gpustack_tests::wait::until;

const FINALIZER: &str = "gpustack.ai/test-cleanup";

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] Box<finalizer::Error<kube::Error>>);

struct Ctx {
    api: Api<Devices>,
    cleaned: Mutex<Vec<String>>,
}

async fn reconcile(obj: Arc<Devices>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api = ctx.api.clone();
    finalizer::finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(d) => {
                let status = json!({"status": {"groups": [{"id": "reconciled", "manufacturer": "nvidia", "accelerators": []}]}});
                api.patch_status(&d.name_any(), &PatchParams::default(), &Patch::Merge(status)).await?;
                Ok(Action::requeue(Duration::from_secs(300)))
            }
            Finalizer::Cleanup(d) => {
                ctx.cleaned.lock().unwrap().push(d.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError(Box::new(e)))
}

fn error_policy(_: Arc<Devices>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn controller_with_finalizer_reconciles_and_cleans_up() {
    let h = start().await;
    install_crds(&h.client).await;
    let api: Api<Devices> = Api::all(h.client.clone());
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        cleaned: Mutex::new(Vec::new()),
    });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );

    api.create(
        &PostParams::default(),
        &Devices::new("node-a", Default::default()),
    )
    .await
    .unwrap();
    until("finalizer added and status written", DEADLINE, || {
        let api = api.clone();
        async move {
            let d = api.get("node-a").await.ok()?;
            let done = d.finalizers().iter().any(|f| f == FINALIZER)
                && d.status
                    .as_ref()
                    .is_some_and(|s| s.groups.first().is_some_and(|g| g.id == "reconciled"));
            done.then_some(())
        }
    })
    .await;

    api.delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    until("object gone after cleanup", DEADLINE, || {
        let api = api.clone();
        async move {
            matches!(api.get("node-a").await, Err(kube::Error::Api(s)) if s.code == 404)
                .then_some(())
        }
    })
    .await;
    assert_eq!(*ctx.cleaned.lock().unwrap(), vec!["node-a".to_string()]);
    controller.abort();
}
