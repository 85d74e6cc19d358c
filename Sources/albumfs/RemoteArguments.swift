import AlbumCore

/// `--remote s3://BUCKET/PREFIX --endpoint URL [--region R] [--profile P]`,
/// as `init` and `remote attach` take them (never keys: those come from the
/// environment or the credentials file).
struct RemoteArguments {
    var url: String?
    var endpoint: String?
    var region = "us-east-1"
    var profile: String?

    /// Takes `argument` (and its value) if it is one of these options.
    mutating func take(_ argument: String, from reader: inout ArgumentReader) throws(CommandFailure) -> Bool {
        if argument.hasPrefix("--remote") { url = try reader.value(of: "--remote", in: argument) }
        else if argument.hasPrefix("--endpoint") { endpoint = try reader.value(of: "--endpoint", in: argument) }
        else if argument.hasPrefix("--region") { region = try reader.value(of: "--region", in: argument) }
        else if argument.hasPrefix("--profile") { profile = try reader.value(of: "--profile", in: argument) }
        else { return false }
        return true
    }

    /// The remote they name; nil when neither the address nor the endpoint was given.
    func configuration() throws(CommandFailure) -> RemoteConfiguration? {
        switch (url, endpoint) {
        case (nil, nil): return nil
        case (let url?, let endpoint?): return RemoteConfiguration(url: url, endpoint: endpoint, region: region, profile: profile)
        default: throw .usage("--remote and --endpoint go together")
        }
    }

    /// Makes the bucket, or finds it: proves the endpoint and the keys before anything is written.
    static func makeBucket(_ remote: RemoteConfiguration) throws(CommandFailure) {
        do {
            try RemoteConnection.backend(for: remote).createBucket()
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            throw CommandFailure(.unusableStore, "cannot use the remote \(remote.url) at \(remote.endpoint): \(error)")
        }
    }
}
