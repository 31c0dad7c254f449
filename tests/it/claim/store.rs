//! The claim protocol through the store API alone, without HTTP: what the
//! inbox and outbox workers build on.

use std::time::Duration;

use crate::support::*;
use webhook_idempotency::store::claim::{Claim, ClaimStore, CommitErrorKind};
use webhook_idempotency::ScopedEvent;

fn event(key: &str) -> ScopedEvent {
    ScopedEvent::new("queue", "orders", key).event_type("order.paid")
}

async fn write_effect(claimed: &webhook_idempotency::store::claim::ClaimedEvent) {
    let mut client = TxDb::of(&claimed.tx()).await.unwrap();
    client
        .execute(
            "INSERT INTO effects (provider, scope, event_key, event_type, body) VALUES ($1, $2, $3, $4, ''::bytea)",
            &[
                claimed.event().provider().into(),
                claimed.event().scope().into(),
                claimed.event().key().into(),
                claimed.event().get_event_type().into(),
            ],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn claim_write_commit_then_done() {
    let db = TestDb::new().await;
    let store = ClaimStore::builder(db.pool.clone()).build().unwrap();
    let Claim::Acquired(claimed) = store.claim(&event("m-1")).await.unwrap() else { panic!("first claim") };
    assert_eq!(claimed.attempt(), 1);
    write_effect(&claimed).await;
    claimed.commit(200).await.unwrap();
    assert_eq!(db.effects_for("m-1").await, 1);
    let again = store.claim(&event("m-1")).await.unwrap();
    assert!(matches!(again, Claim::Done { status: Some(200) }), "{again:?}");
    assert_eq!(db.event_row("m-1").await, Some(("done".into(), 1, Some(200))));
    assert_eq!(db.idle_in_transaction().await, 0);
}

#[tokio::test]
async fn fail_rolls_back_the_writes_and_the_next_claim_is_attempt_two() {
    let db = TestDb::new().await;
    let store = ClaimStore::builder(db.pool.clone()).build().unwrap();
    let Claim::Acquired(claimed) = store.claim(&event("m-2")).await.unwrap() else { panic!("first claim") };
    write_effect(&claimed).await;
    claimed.fail("downstream refused", Some(502)).await.unwrap();
    assert_eq!(db.effects_for("m-2").await, 0, "rolled back");
    assert_eq!(db.event_row("m-2").await, Some(("failed".into(), 1, Some(502))));
    let Claim::Acquired(retry) = store.claim(&event("m-2")).await.unwrap() else { panic!("claimed again") };
    assert_eq!(retry.attempt(), 2);
    write_effect(&retry).await;
    retry.commit(200).await.unwrap();
    assert_eq!(db.effects_for("m-2").await, 1);
}

#[tokio::test]
async fn a_held_claim_is_in_flight_for_others_and_dropping_it_rolls_back() {
    let db = TestDb::new().await;
    let store = ClaimStore::builder(db.pool(4)).in_flight_wait(Duration::from_millis(50)).build().unwrap();
    let Claim::Acquired(held) = store.claim(&event("m-3")).await.unwrap() else { panic!("first claim") };
    write_effect(&held).await;
    assert!(matches!(store.claim(&event("m-3")).await.unwrap(), Claim::InFlight));
    drop(held); // the connection is closed; PostgreSQL rolls back
    let Claim::Acquired(next) = store.claim(&event("m-3")).await.unwrap() else { panic!("claimable after the drop") };
    assert_eq!(next.attempt(), 1, "nothing was recorded for the dropped claim");
    next.commit(200).await.unwrap();
    assert_eq!(db.effects_for("m-3").await, 0, "the dropped claim's write is gone");
}

#[tokio::test]
async fn a_swallowed_error_is_never_committed() {
    let db = TestDb::new().await;
    let store = ClaimStore::builder(db.pool.clone()).build().unwrap();
    let Claim::Acquired(claimed) = store.claim(&event("m-4")).await.unwrap() else { panic!("first claim") };
    write_effect(&claimed).await;
    let mut client = TxDb::of(&claimed.tx()).await.unwrap();
    assert!(client.execute("SELECT 1/0", &[]).await.is_err());
    drop(client);
    let err = claimed.commit(200).await.unwrap_err();
    assert_eq!(err.kind(), CommitErrorKind::Aborted);
    assert_eq!(err.sqlstate(), Some("25P02"));
    assert_eq!(db.effects_for("m-4").await, 0);
    assert_eq!(db.event_row("m-4").await.map(|r| r.0), Some("failed".into()));
}
