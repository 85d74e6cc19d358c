#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// The conditional requests a lease needs of the bucket (S3ObjectBackend's).
public protocol LeaseBucket: Sendable {
    /// The object `key`'s bytes and ETag; nil: there is none.
    func read(_ key: String) throws -> (bytes: [UInt8], etag: String)?
    /// Stores `bytes` as `key` if no object has that key (`etag` nil) or if
    /// the object's ETag is `etag`; the new ETag, or nil when that did not
    /// hold (another writer came first).
    func put(_ key: String, bytes: [UInt8], ifETag etag: String?) throws -> String?
}

/// Who holds the library's lease: written into `PREFIX/lease`.
struct LeaseRecord: Equatable {
    /// The holding store's id (a file of its own: a recovered store has another).
    var holder: String
    var host: String
    var pid: Int32
    /// This mount's own (random): no two mounts write the same bytes, so no
    /// two share an ETag, even of one store in one process.
    var session: String
    /// Seconds since the epoch (the holder's clock); 0: released.
    var expires: Int

    func encoded() -> [UInt8] {
        Array("albumfs-lease 1\nholder \(holder)\nhost \(host)\npid \(pid)\nsession \(session)\nexpires \(expires)\n".utf8)
    }

    init(holder: String, host: String, pid: Int32, session: String, expires: Int) {
        (self.holder, self.host, self.pid, self.session, self.expires) = (holder, host, pid, session, expires)
    }

    init?(decoding bytes: [UInt8]) {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard lines.first == "albumfs-lease 1" else { return nil }
        var fields: [Substring: Substring] = [:]
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { return nil }
            fields[line[..<space]] = line[line.index(after: space)...]
        }
        guard let holder = fields["holder"], let host = fields["host"], let pid = fields["pid"].flatMap({ Int32($0) }),
              let session = fields["session"], let expires = fields["expires"].flatMap({ Int($0) }) else { return nil }
        self.init(holder: String(holder), host: String(host), pid: pid, session: String(session), expires: expires)
    }
}

/// One writer at a time (SEMANTICS.md § Surviving the machine): a
/// read-write mount holds the library's lease in the bucket, taken with a
/// conditional PUT (`If-None-Match: *` when there is none, `If-Match: ETAG`
/// to replace an expired or released one), renewed every third of its time
/// with `If-Match` on the ETag it holds, released at the end (expiry 0).
/// Nothing is uploaded, deleted or snapshotted without it (`mayWrite`).
public final class Lease: Sendable {
    public static let key = "lease"

    public enum State: Sendable, Equatable {
        /// Not taken yet (the bucket unreachable): tried again at each renewal.
        case pending(String)
        case held(etag: String)
        /// Another store holds it, or took it (`-o take_over` elsewhere).
        case lost(String)
    }

    /// Why a mount is refused: another store holds the lease.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    private let bucket: any LeaseBucket
    private let me: LeaseRecord
    private let duration: Int
    private let url: String
    private let clock: @Sendable () -> Int
    public let state: Mutex<State>
    private let stopped = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)

    /// `holder`: the store's id; `duration`: seconds a renewal lasts.
    public init(bucket: any LeaseBucket, url: String, holder: String, duration: Int,
                clock: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let host = String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        self.bucket = bucket
        self.url = url
        self.duration = duration
        self.clock = clock
        self.me = LeaseRecord(holder: holder, host: host, pid: getpid(), session: String(UInt64.random(in: 0...UInt64.max), radix: 16), expires: 0)
        self.state = Mutex(.pending("the lease is not taken yet"))
    }

    /// Takes the lease: held when it was free, expired, released or ours
    /// (or `takeOver`); a refusal naming the holder when another store holds
    /// it; pending when the bucket cannot be reached (tried again later).
    public func acquire(takeOver: Bool = false) throws(Refusal) {
        do {
            if let etag = try take(takeOver: takeOver) {
                state.withLock { $0 = .held(etag: etag) }
            }
        } catch let refusal as Refusal {
            state.withLock { $0 = .lost(refusal.description) }
            throw refusal
        } catch {
            state.withLock { $0 = .pending("the lease could not be taken: \(error)") }
        }
    }

    /// Nil while the lease is held; else why nothing may be written to the bucket.
    public func mayWrite() -> String? {
        switch state.withLock({ $0 }) {
        case .held: return nil
        case .pending(let why), .lost(let why): return why
        }
    }

    /// Renews every third of the lease's time until `stop` (a lease not
    /// taken yet is taken then; one lost stays lost: the mount writes no
    /// more). `lost` is told once, with why.
    public func startRenewing(log: @escaping @Sendable (String) -> Void) {
        running.store(true, ordering: .relaxed)
        DispatchQueue(label: "albumfs.lease", qos: .utility).async { [self] in
            defer { ended.signal() }
            while stopped.wait(timeout: .now() + Double(max(1, duration / 3))) == .timedOut {
                let before = state.withLock { $0 }
                do {
                    switch before {
                    case .held(let etag): try renew(etag)
                    case .pending: _ = try take(takeOver: false).map { etag in state.withLock { $0 = .held(etag: etag) } }
                    case .lost: return
                    }
                } catch let refusal as Refusal {
                    state.withLock { $0 = .lost(refusal.description) }
                } catch {
                    log("remote: renewing the lease: \(error) (tried again in \(max(1, duration / 3)) s)")
                }
                if case .lost(let why) = state.withLock({ $0 }), before != state.withLock({ $0 }) {
                    log("remote: \(why); this mount writes nothing more to the bucket: unmount it")
                }
            }
        }
    }

    /// Stops renewing and releases the lease (expiry 0, if still ours),
    /// waiting at most `timeout` seconds: an unreachable store must not hold
    /// up an unmount (the lease then runs out by itself). Whether it was released.
    @discardableResult
    public func release(timeout: Double = 2) -> Bool {
        let deadline = DispatchTime.now() + timeout
        let done = DispatchSemaphore(value: 0)
        let released = Atomic<Bool>(false)
        DispatchQueue.global(qos: .utility).async { [self] in
            defer { done.signal() }
            if running.load(ordering: .relaxed) {
                stopped.signal()
                _ = ended.wait(timeout: .distantFuture)
            }
            guard case .held(let etag) = state.withLock({ $0 }) else { return }
            var record = me
            record.expires = 0
            if (try? bucket.put(Self.key, bytes: record.encoded(), ifETag: etag)) != nil { released.store(true, ordering: .relaxed) }
            state.withLock { $0 = .pending("the lease was released") }
        }
        _ = done.wait(timeout: deadline)
        return released.load(ordering: .relaxed)
    }

    /// The store's own id as a lease holder: `STORE/holder`, made on first
    /// use (a recovered store makes its own: it is not the dead one).
    public static func holderID(of location: StoreLocation) throws(LibraryError) -> String {
        if let id = location.readSmallFile("holder"), id.utf8.count == 32 { return id }
        var generator = SystemRandomNumberGenerator()
        let id = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            .map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        try location.writeSmallFile("holder", id)
        return id
    }

    private func record() -> LeaseRecord {
        var record = me
        record.expires = clock() + duration
        return record
    }

    /// The conditional PUT that takes the lease; its ETag, or a refusal.
    private func take(takeOver: Bool) throws -> String? {
        for _ in 0..<3 {
            if let (bytes, etag) = try bucket.read(Self.key) {
                let current = LeaseRecord(decoding: bytes)
                if let current, current.holder != me.holder, current.expires > clock(), !takeOver {
                    throw refusal(current)
                }
                if current == nil && !takeOver {
                    throw Refusal(description: "\(url)/lease is not a lease albumfs wrote; -o take_over replaces it")
                }
                if let taken = try bucket.put(Self.key, bytes: record().encoded(), ifETag: etag) { return taken }
            } else if let taken = try bucket.put(Self.key, bytes: record().encoded(), ifETag: nil) {
                return taken
            }
            // Another store changed it between the read and the PUT: look again.
        }
        if let (bytes, _) = try bucket.read(Self.key), let current = LeaseRecord(decoding: bytes) { throw refusal(current) }
        throw Refusal(description: "the lease of \(url) keeps changing: another store is taking it")
    }

    private func renew(_ etag: String) throws {
        if let renewed = try bucket.put(Self.key, bytes: record().encoded(), ifETag: etag) {
            state.withLock { $0 = .held(etag: renewed) }
            return
        }
        // Changed behind us: ours still (a renewal whose answer was lost), or taken.
        if let (bytes, now) = try bucket.read(Self.key), let current = LeaseRecord(decoding: bytes), current.holder == me.holder, current.session == me.session {
            state.withLock { $0 = .held(etag: now) }
            return
        }
        let holder = try bucket.read(Self.key).flatMap { LeaseRecord(decoding: $0.bytes) }
        throw Refusal(description: holder.map { "the lease was taken by \($0.host) (pid \($0.pid))" } ?? "the lease was taken by another store")
    }

    private func refusal(_ holder: LeaseRecord) -> Refusal {
        Refusal(description: "\(url) is mounted read-write on \(holder.host) (pid \(holder.pid)) until \(ISO8601.utc(Nanoseconds(holder.expires) * 1_000_000_000)),"
                + " renewed while it stays mounted: mount read-only (-o ro), wait, or if that machine is gone: -o take_over")
    }
}
