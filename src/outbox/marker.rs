//! The delivered marks of a worker's concurrent runs, written in batches:
//! one statement marks every run that finished while the previous one was
//! in flight (each row still fenced by its own lease token), so a worker
//! delivering many small effects does not pay one commit per effect.
//! River's batch completer has the same shape. On Citus a batch is one
//! statement per scope: the statement names its scope, so Citus routes it
//! to that scope's shard and it commits on one worker, never in two phases
//! (a statement over several shards would, and a coordinator backend killed
//! between its phases leaves the rows locked until Citus's recovery).

use std::collections::{BTreeMap, HashSet};

use tokio::sync::{mpsc, oneshot};

use crate::store::driver::{Db, Param};
use crate::store::outbox::OutboxRow;
use crate::store::queue::Leased;

/// The most rows one statement marks.
const MAX_BATCH: usize = 128;

/// One run's mark: its row's identity and token, the remote's reference,
/// and where the outcome goes (`Ok(false)`: the lease was no longer the
/// run's).
struct Mark {
    id: [String; 5],
    token: String,
    remote_ref: Option<String>,
    reply: oneshot::Sender<Result<bool, String>>,
}

/// Hands marks to the batching task; the task ends when the last clone of
/// the worker's work (and so this) is dropped.
pub(crate) struct Marker {
    marks: mpsc::UnboundedSender<Mark>,
}

impl Marker {
    /// Starts the batching task on `db` with the delivered statement `sql`.
    pub(crate) fn start(db: Db, sql: String) -> Self {
        let (marks, queue) = mpsc::unbounded_channel();
        tokio::spawn(batches(db, sql, queue));
        Self { marks }
    }

    /// Marks `row` delivered (with the batch it joins). `Ok(false)`: its
    /// lease was taken over; `Err`: the statement failed (not recorded: the
    /// lease expires and the row runs again, with the same downstream key).
    pub(crate) async fn mark(&self, row: &Leased<OutboxRow>, remote_ref: Option<String>) -> Result<bool, String> {
        let (reply, answer) = oneshot::channel();
        let id = [0, 1, 2, 3, 4].map(|i| row.key_part(i).to_owned());
        let mark = Mark { id, token: row.token().to_owned(), remote_ref, reply };
        self.marks.send(mark).map_err(|_| "the worker is stopping".to_owned())?;
        answer.await.map_err(|_| "the marking task stopped".to_owned())?
    }
}

/// Marks one run delivered with its own statement on `db` (a retried end,
/// outside the batches, on a more patient `db`).
pub(crate) async fn mark_one(
    db: &Db,
    sql: &str,
    row: &Leased<OutboxRow>,
    remote_ref: Option<String>,
) -> Result<bool, String> {
    let (reply, answer) = oneshot::channel();
    let id = [0, 1, 2, 3, 4].map(|i| row.key_part(i).to_owned());
    let mark = Mark { id, token: row.token().to_owned(), remote_ref, reply };
    write(db, sql, vec![mark]).await;
    answer.await.map_err(|_| "the mark was dropped".to_owned())?
}

async fn batches(db: Db, sql: String, mut queue: mpsc::UnboundedReceiver<Mark>) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(mark) => batch.push(mark),
                Err(_) => break,
            }
        }
        write(&db, &sql, batch).await;
    }
}

/// Marks `batch`, each run getting its answer: one statement, or on Citus
/// one per scope of the batch.
async fn write(db: &Db, sql: &str, batch: Vec<Mark>) {
    let one_scope = batch.iter().all(|m| m.id[0] == batch[0].id[0]);
    if one_scope || db.citus() != Some(true) {
        return write_together(db, sql, batch).await;
    }
    let mut scopes: BTreeMap<String, Vec<Mark>> = BTreeMap::new();
    for mark in batch {
        scopes.entry(mark.id[0].clone()).or_default().push(mark);
    }
    for (_, marks) in scopes {
        write_together(db, sql, marks).await;
    }
}

/// One statement marking `batch`, naming its scope when all its rows share
/// one (`$8`).
async fn write_together(db: &Db, sql: &str, batch: Vec<Mark>) {
    let scope = batch.iter().all(|m| m.id[0] == batch[0].id[0]).then(|| batch[0].id[0].clone());
    let column = |i: usize| batch.iter().map(|m| m.id[i].clone()).collect::<Vec<_>>();
    let (scopes, providers, keys, effects, ordinals) = (column(0), column(1), column(2), column(3), column(4));
    let tokens: Vec<String> = batch.iter().map(|m| m.token.clone()).collect();
    let refs: Vec<Option<String>> = batch.iter().map(|m| m.remote_ref.clone()).collect();
    let params = [
        Param::OptTexts(Some(&scopes)),
        Param::OptTexts(Some(&providers)),
        Param::OptTexts(Some(&keys)),
        Param::OptTexts(Some(&effects)),
        Param::OptTexts(Some(&ordinals)),
        Param::OptTexts(Some(&tokens)),
        Param::TextList(&refs),
        Param::OptText(scope.as_deref()),
    ];
    match db.query("outbox delivered", sql, &params).await {
        Ok(rows) => {
            // A run is marked when its row and its token came back: a stale
            // run of the same row in the same batch is not.
            let marked: HashSet<([String; 5], String)> =
                rows.iter().map(|r| ([0, 1, 2, 3, 4].map(|i| r.get::<String>(i)), r.get::<String>(5))).collect();
            for mark in batch {
                let _ = mark.reply.send(Ok(marked.contains(&(mark.id, mark.token))));
            }
        }
        Err(e) => {
            let error = e.to_string();
            for mark in batch {
                let _ = mark.reply.send(Err(error.clone()));
            }
        }
    }
}
