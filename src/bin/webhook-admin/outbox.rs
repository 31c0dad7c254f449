//! `webhook-admin outbox ...`: the outbox's statistics, listings, one
//! effect, and the audited actions (resolve, requeue, purge).

use serde_json::{json, Value};
use webhook_idempotency::store::admin::{Admin, EffectFilter, EffectId, EffectRow, Resolution};

use super::{actor, Fail, Report};
use crate::cli::{EffectIdArgs, EffectState, EffectTarget, OutboxCommand, PurgeArgs, ResolveAs};
use crate::render::{
    ago, detail_text, duration_text, json_text, opt_time, payload_text, printable, shorten, table, time, time_json,
};

pub(crate) async fn run(admin: &Admin, command: OutboxCommand, as_json: bool) -> Result<Report, Fail> {
    match command {
        OutboxCommand::Stats => stats(admin, as_json).await,
        OutboxCommand::List { state, filter, limit } => list(admin, state, filter, limit, as_json).await,
        OutboxCommand::Show { id, payload } => show(admin, id, payload, as_json).await,
        OutboxCommand::Resolve { id, resolution, remote_ref, reason, dry_run, actor: who } => {
            let resolution = match resolution {
                ResolveAs::Delivered => Resolution::Delivered { remote_ref },
                ResolveAs::Dead => Resolution::Dead { reason: reason.unwrap_or_default() },
                ResolveAs::Resend => Resolution::Resend,
            };
            resolve(admin, id, resolution, dry_run, actor(who)?, as_json).await
        }
        OutboxCommand::Requeue { filter, all, dry_run, actor: who } => {
            let filter = effect_filter(filter);
            if filter == EffectFilter::default() && !all {
                return Err(Fail::usage(
                    "outbox requeue needs a target: --provider/--scope/--key/--effect, or --all for every dead effect",
                ));
            }
            let actor = actor(who)?;
            let n = admin.requeue_effects(&filter, dry_run, &actor).await?;
            changed("requeue", n, dry_run, &actor, "dead effects back to pending, due now", as_json)
        }
        OutboxCommand::Purge(PurgeArgs { older_than, dry_run, actor: who, scope }) => {
            let actor = actor(who)?;
            let n = admin.clone().purge_scope(scope).purge_effects(older_than, dry_run, &actor).await?;
            changed("purge", n, dry_run, &actor, "delivered effects deleted", as_json)
        }
    }
}

fn effect_filter(t: EffectTarget) -> EffectFilter {
    EffectFilter { provider: t.of.provider, scope: t.of.scope, key: t.key, effect: t.effect }
}

fn effect_id(a: EffectIdArgs) -> EffectId {
    EffectId { provider: a.provider, scope: a.scope, key: a.key, effect: a.effect, ordinal: a.ordinal }
}

fn row_json(r: &EffectRow) -> Value {
    json!({
        "provider": r.id.provider,
        "scope": r.id.scope,
        "key": r.id.key,
        "effect": r.id.effect,
        "ordinal": r.id.ordinal,
        "downstream_key": r.id.downstream_key(),
        "state": r.state,
        "attempts": r.attempts,
        "last_error": r.last_error,
        "remote_ref": r.remote_ref,
        "created_at": time_json(Some(r.created_at)),
        "delivered_at": time_json(r.delivered_at),
        "last_failed_at": time_json(r.last_failed_at),
        "uncertain_since": time_json(r.uncertain_since),
        "run_at": time_json(r.run_at),
        "locked_until": time_json(r.locked_until),
    })
}

async fn stats(admin: &Admin, as_json: bool) -> Result<Report, Fail> {
    let s = admin.outbox_stats().await?;
    if as_json {
        let v = json!({
            "by_state": s.by_state.iter().map(|(e, st, n)| json!({"effect": e, "state": st, "rows": n})).collect::<Vec<_>>(),
            "oldest_due_secs": s.oldest_due.map(|d| d.as_secs_f64()),
            "awaiting_operator": s.awaiting_operator,
        });
        return Ok(Report::new(json_text(&v), true));
    }
    let mut out = String::from("Effects by name and state\n");
    if s.by_state.is_empty() {
        out.push_str("(no effects)\n");
    } else {
        let mut t = table(&["effect", "state", "rows"]);
        for (e, st, n) in &s.by_state {
            t.add_row(vec![printable(e), st.clone(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
    }
    let oldest = s.oldest_due.map_or_else(|| "none due".to_owned(), duration_text);
    out.push_str(&format!("Oldest due: {oldest}\n"));
    out.push_str(&format!(
        "Uncertain, waiting for an operator: {} (webhook-admin outbox list --state uncertain)\n",
        s.awaiting_operator
    ));
    Ok(Report::new(out, true))
}

async fn list(admin: &Admin, state: EffectState, f: EffectTarget, limit: u32, as_json: bool) -> Result<Report, Fail> {
    let rows = admin.list_effects(state.as_str(), &effect_filter(f), limit as usize).await?;
    if as_json {
        return Ok(Report::new(json_text(&Value::Array(rows.iter().map(row_json).collect())), !rows.is_empty()));
    }
    if rows.is_empty() {
        return Ok(Report::new(format!("no {} effects match\n", state.as_str()), false));
    }
    let mut t = table(&["provider", "scope", "key", "effect", "#", "state", "attempts", "created", "last error"]);
    for r in &rows {
        t.add_row(vec![
            printable(&r.id.provider),
            printable(&r.id.scope),
            printable(&r.id.key),
            printable(&r.id.effect),
            r.id.ordinal.to_string(),
            r.state.clone(),
            r.attempts.to_string(),
            time(r.created_at),
            r.last_error.as_deref().map_or_else(|| "-".into(), |e| shorten(e, 60)),
        ]);
    }
    let more =
        if rows.len() == limit as usize { format!(" (first {limit}: raise --limit for more)") } else { String::new() };
    Ok(Report::new(format!("{t}\n{} {} effects, oldest first{more}\n", rows.len(), state.as_str()), true))
}

async fn show(admin: &Admin, id: EffectIdArgs, payload: bool, as_json: bool) -> Result<Report, Fail> {
    let id = effect_id(id);
    let Some((r, body)) = admin.show_effect(&id, payload).await? else {
        let out = if as_json {
            "null\n".to_owned()
        } else {
            format!(
                "no effect {} / {} / {} / {} #{}\n",
                printable(&id.provider),
                printable(&id.scope),
                printable(&id.key),
                printable(&id.effect),
                id.ordinal
            )
        };
        return Ok(Report::new(out, false));
    };
    if as_json {
        let mut v = row_json(&r);
        if let Some((content_type, bytes)) = &body {
            let (encoding, data) = payload_text(bytes);
            v["payload"] = json!({"content_type": content_type, "encoding": encoding, "data": data});
        }
        return Ok(Report::new(json_text(&v), true));
    }
    let dash = || "-".to_owned();
    let t = table(&["field", "value"]);
    let fields = [
        ("provider", printable(&r.id.provider)),
        ("scope", printable(&r.id.scope)),
        ("key", printable(&r.id.key)),
        ("effect", printable(&r.id.effect)),
        ("ordinal", r.id.ordinal.to_string()),
        ("downstream key", r.id.downstream_key()),
        ("state", r.state.clone()),
        ("attempts", r.attempts.to_string()),
        ("last error", r.last_error.as_deref().map_or_else(dash, printable)),
        ("remote ref", r.remote_ref.as_deref().map_or_else(dash, printable)),
        ("created", ago(r.created_at)),
        ("delivered", opt_time(r.delivered_at)),
        ("last failed", opt_time(r.last_failed_at)),
        ("uncertain since", opt_time(r.uncertain_since)),
        ("run at", opt_time(r.run_at)),
        ("locked until", opt_time(r.locked_until)),
    ];
    let payload = body.as_ref().map(|(content_type, bytes)| (Some(content_type.as_str()), &bytes[..]));
    let out = detail_text(t, fields, payload);
    Ok(Report::new(out, true))
}

async fn resolve(
    admin: &Admin,
    id: EffectIdArgs,
    resolution: Resolution,
    dry_run: bool,
    actor: String,
    as_json: bool,
) -> Result<Report, Fail> {
    let id = effect_id(id);
    let resolved = admin.resolve_effect(&id, &resolution, dry_run, &actor).await?;
    if as_json {
        let v = json!({"action": "resolve", "dry_run": dry_run, "resolved": resolved, "actor": actor,
                       "effect": row_id_json(&id), "resolution": resolution});
        return Ok(Report::new(json_text(&v), resolved));
    }
    let what = match &resolution {
        Resolution::Delivered { .. } => "delivered (done)",
        Resolution::Dead { .. } => "dead",
        Resolution::Resend => "to be sent again now, with the same downstream key",
    };
    let out = match (resolved, dry_run) {
        (true, true) => format!("dry run: the effect is uncertain and would be marked {what}; nothing changed\n"),
        (true, false) => {
            format!("resolved: marked {what} (actor {}; recorded in the audit table)\n", printable(&actor))
        }
        (false, _) => match admin.show_effect(&id, false).await? {
            None => "nothing resolved: no such effect\n".to_owned(),
            Some((r, _)) => format!("nothing resolved: the effect is {}, not uncertain\n", r.state),
        },
    };
    Ok(Report::new(out, resolved))
}

fn row_id_json(id: &EffectId) -> Value {
    json!({"provider": id.provider, "scope": id.scope, "key": id.key, "effect": id.effect, "ordinal": id.ordinal})
}

fn changed(action: &str, n: u64, dry_run: bool, actor: &str, what: &str, as_json: bool) -> Result<Report, Fail> {
    let out = if as_json {
        json_text(&json!({"action": format!("outbox {action}"), "dry_run": dry_run, "rows": n, "actor": actor}))
    } else if dry_run {
        format!("dry run: outbox {action} would change {n} rows; nothing changed\n")
    } else {
        format!("outbox {action}: {n} {what} (actor {}; recorded in the audit table)\n", printable(actor))
    };
    Ok(Report::new(out, n > 0))
}
