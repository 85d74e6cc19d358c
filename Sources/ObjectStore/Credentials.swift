#if canImport(Glibc)
import Glibc
#endif

/// An object store's keys. From the environment (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or a profile of
/// `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE` elsewhere); never
/// from a command line or fstab, where `ps` and other users would see them.
public struct Credentials: Sendable, Equatable {
    public let accessKey: String
    public let secretKey: String
    public let sessionToken: String?

    public init(accessKey: String, secretKey: String, sessionToken: String? = nil) {
        (self.accessKey, self.secretKey, self.sessionToken) = (accessKey, secretKey, sessionToken)
    }

    /// The environment's keys, else `profile` (default: `AWS_PROFILE`, else
    /// `default`) of the credentials file. Nil: none found.
    public static func load(profile: String? = nil, environment: [String: String]) -> Credentials? {
        if profile == nil, let key = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"],
           !key.isEmpty, !secret.isEmpty {
            return Credentials(accessKey: key, secretKey: secret, sessionToken: environment["AWS_SESSION_TOKEN"])
        }
        let path = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? environment["HOME"].map { $0 + "/.aws/credentials" }
        guard let path, let text = readFile(path) else { return nil }
        return parse(text, profile: profile ?? environment["AWS_PROFILE"] ?? "default")
    }

    /// One profile of a credentials file (INI: `[name]`, `key = value`, `#` and `;` comments).
    static func parse(_ text: String, profile: String) -> Credentials? {
        var section = ""
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.trimmingBlanks
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingBlanks
                continue
            }
            guard section == profile, let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals]).trimmingBlanks] = String(line[line.index(after: equals)...]).trimmingBlanks
        }
        guard let key = values["aws_access_key_id"], let secret = values["aws_secret_access_key"] else { return nil }
        return Credentials(accessKey: key, secretKey: secret, sessionToken: values["aws_session_token"])
    }

    private static func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension StringProtocol {
    /// Without the blanks (and line ends) around it.
    var trimmingBlanks: String {
        var s = Substring(self)
        while let first = s.first, first.isWhitespace { s.removeFirst() }
        while let last = s.last, last.isWhitespace { s.removeLast() }
        return String(s)
    }
}
