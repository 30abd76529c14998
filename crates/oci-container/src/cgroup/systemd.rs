//! systemd's D-Bus API, the part a cgroup manager needs: transient scopes started around
//! processes that already run (conmon, a pod's init), stopped on removal, and listed so a
//! restart can stop the ones nothing records any more.
//!
//! A scope is started as runc and crun start the containers' own ones: `StartTransientUnit`
//! with `PIDs`, `Slice`, `Delegate=yes`, `CollectMode=inactive-or-failed` (systemd forgets
//! the unit once it is empty or failed, so nothing piles up), the call made after subscribing
//! to `JobRemoved`, and the job's result awaited: `done` is the only success.

use std::time::Duration;

use futures_util::StreamExt as _;
use zbus::zvariant::{OwnedObjectPath, Value};

/// How long one call (and a start job) may take before it is given up. systemd answers in
/// milliseconds; a node under load or emulation may take seconds.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The error of a D-Bus call, naming the unit and what was asked of it.
#[derive(Debug, thiserror::Error)]
#[error("systemd: {what} {unit}: {reason}")]
pub struct SystemdError {
    /// What was asked (`start scope`, `stop unit`, `list units`, `connect`).
    pub what: &'static str,
    /// The unit, or the pattern listed.
    pub unit: String,
    /// systemd's answer, or why there was none.
    pub reason: String,
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
trait Manager {
    fn subscribe(&self) -> zbus::Result<()>;

    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, Value<'_>)],
        aux: &[(&str, &[(&str, Value<'_>)])],
    ) -> zbus::Result<OwnedObjectPath>;

    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    /// D-Bus signature `a(ssssssouso)`, as systemd declares it.
    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<
        Vec<(
            String,
            String,
            String,
            String,
            String,
            String,
            OwnedObjectPath,
            u32,
            String,
            OwnedObjectPath,
        )>,
    >;

    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: zbus::zvariant::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// A connection to systemd on the system bus.
#[derive(Debug, Clone)]
pub struct Systemd {
    manager: ManagerProxy<'static>,
}

impl Systemd {
    /// Connects to the system bus and to systemd's manager on it.
    ///
    /// # Errors
    ///
    /// [`SystemdError`] when there is no bus (no systemd as init, no D-Bus daemon) or it does
    /// not answer within [`CALL_TIMEOUT`].
    pub async fn connect() -> Result<Systemd, SystemdError> {
        let err = |reason: String| SystemdError {
            what: "connect",
            unit: "to the system bus".to_owned(),
            reason,
        };
        let connect = async {
            let conn = zbus::Connection::system().await?;
            let manager = ManagerProxy::new(&conn).await?;
            manager.subscribe().await?;
            Ok::<_, zbus::Error>(manager)
        };
        let manager = tokio::time::timeout(CALL_TIMEOUT, connect)
            .await
            .map_err(|_| err(format!("no answer in {CALL_TIMEOUT:?}")))?
            .map_err(|e| err(e.to_string()))?;
        Ok(Systemd { manager })
    }

    /// Starts the transient scope `unit` in `slice` around the running process `pid`, and
    /// waits for its start job to finish.
    ///
    /// # Errors
    ///
    /// [`SystemdError`] with systemd's reason (a unit of that name exists, the process is
    /// gone, the slice name is invalid) or the job's result when it is not `done`.
    pub async fn start_scope(
        &self,
        unit: &str,
        slice: &str,
        pid: u32,
        description: &str,
    ) -> Result<(), SystemdError> {
        let err = |reason: String| SystemdError {
            what: "start scope",
            unit: unit.to_owned(),
            reason,
        };
        let started = async {
            // Subscribed to before the call, or a fast job's end could pass unseen.
            let mut removed = self.manager.receive_job_removed().await?;
            let properties = [
                ("Description", Value::from(description)),
                ("Slice", Value::from(slice)),
                ("PIDs", Value::from(vec![pid])),
                ("Delegate", Value::from(true)),
                ("CollectMode", Value::from("inactive-or-failed")),
                ("DefaultDependencies", Value::from(false)),
            ];
            let job = self
                .manager
                .start_transient_unit(unit, "fail", &properties, &[])
                .await?;
            while let Some(signal) = removed.next().await {
                let args = signal.args()?;
                if args.job.as_str() == job.as_str() {
                    return Ok(args.result.to_owned());
                }
            }
            Err(zbus::Error::Failure(
                "the bus connection closed before the job ended".to_owned(),
            ))
        };
        let result = tokio::time::timeout(CALL_TIMEOUT, started)
            .await
            .map_err(|_| err(format!("no answer in {CALL_TIMEOUT:?}")))?
            .map_err(|e| err(e.to_string()))?;
        if result == "done" {
            Ok(())
        } else {
            Err(err(format!("its start job ended {result:?}")))
        }
    }

    /// Stops `unit` (its processes are killed as the unit says, SIGTERM then SIGKILL).
    /// Returns whether systemd knew it: a unit already gone is not an error.
    ///
    /// # Errors
    ///
    /// [`SystemdError`] with systemd's reason.
    pub async fn stop_unit(&self, unit: &str) -> Result<bool, SystemdError> {
        let err = |reason: String| SystemdError {
            what: "stop unit",
            unit: unit.to_owned(),
            reason,
        };
        let stopped = tokio::time::timeout(CALL_TIMEOUT, self.manager.stop_unit(unit, "replace"))
            .await
            .map_err(|_| err(format!("no answer in {CALL_TIMEOUT:?}")))?;
        match stopped {
            Ok(_) => Ok(true),
            Err(zbus::Error::MethodError(name, _, _))
                if name.as_str() == "org.freedesktop.systemd1.NoSuchUnit" =>
            {
                Ok(false)
            }
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// The loaded units matching the glob `pattern` (`crio-*.scope`): name and description.
    ///
    /// # Errors
    ///
    /// [`SystemdError`] with systemd's reason.
    pub async fn units(&self, pattern: &str) -> Result<Vec<(String, String)>, SystemdError> {
        let err = |reason: String| SystemdError {
            what: "list units",
            unit: pattern.to_owned(),
            reason,
        };
        let units = tokio::time::timeout(
            CALL_TIMEOUT,
            self.manager.list_units_by_patterns(&[], &[pattern]),
        )
        .await
        .map_err(|_| err(format!("no answer in {CALL_TIMEOUT:?}")))?
        .map_err(|e| err(e.to_string()))?;
        Ok(units.into_iter().map(|unit| (unit.0, unit.1)).collect())
    }
}
