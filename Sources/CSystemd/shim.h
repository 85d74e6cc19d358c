// sd_notify: readiness and stop notifications to systemd (a no-op where
// NOTIFY_SOCKET is not set, so the daemon calls it unconditionally).
#include <systemd/sd-daemon.h>
