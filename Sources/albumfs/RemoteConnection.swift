import AlbumCore
import ObjectStore

extension S3ObjectBackend: ObjectBackend {}
extension S3ObjectBackend: LeaseBucket {}

/// A store's remote made into a bucket to talk to: its address from the
/// store, its keys from the environment or the credentials file (never from
/// the store or a command line).
enum RemoteConnection {
    /// `readTimeout`: the bound on a read waiting for the bucket (`-o remote_timeout`).
    static func backend(for remote: RemoteConfiguration, readTimeout: Double = 10) throws(CommandFailure) -> S3ObjectBackend {
        let location: RemoteLocation
        do {
            location = try RemoteLocation(url: remote.url, endpoint: remote.endpoint, region: remote.region)
        } catch {
            throw CommandFailure(.unusableStore, "the store's remote: \(error)")
        }
        guard let credentials = Credentials.load(profile: remote.profile, environment: environment()) else {
            let profile = remote.profile.map { "the profile [\($0)] of ~/.aws/credentials" } ?? "~/.aws/credentials"
            throw CommandFailure(.unusableStore, "the remote \(location) needs keys: set AWS_ACCESS_KEY_ID and "
                                 + "AWS_SECRET_ACCESS_KEY, or put them in \(profile)")
        }
        do {
            return try S3ObjectBackend(location: location, credentials: credentials, fetchTimeouts: .within(readTimeout))
        } catch {
            throw CommandFailure(.unusableStore, "the remote \(location): \(error)")
        }
    }
}
