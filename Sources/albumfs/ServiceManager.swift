import CSystemd

/// Tells systemd (a `Type=notify` unit) when the mount is live and when it
/// stops. sd_notify does nothing where NOTIFY_SOCKET is not set.
enum ServiceManager {
    static func ready(mountPoint: String) {
        _ = sd_notify(0, "READY=1\nSTATUS=serving \(mountPoint)")
    }

    static func stopping() {
        _ = sd_notify(0, "STOPPING=1")
    }
}
