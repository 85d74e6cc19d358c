/// The library a command works on: `--store DIR` or a MOUNTPOINT, at most
/// one of them (neither: the default store). Shared by the commands that
/// take both (stats, dedupe).
struct LibraryTarget {
    var store: String?
    var mountPoint: String?

    /// Reads `arguments`; `option` is offered each other argument starting
    /// with `-` first and returns whether it was one of the command's own.
    init(parsing arguments: [String], for command: String,
         option: (String) -> Bool) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            if argument.hasPrefix("--store") {
                store = try reader.value(of: "--store", in: argument)
            } else if argument.hasPrefix("-") {
                guard option(argument) else { throw .usage("unknown \(command) argument \(argument)") }
            } else {
                guard mountPoint == nil else { throw .usage("expected at most one MOUNTPOINT") }
                mountPoint = argument
            }
        }
        if store != nil && mountPoint != nil { throw .usage("give --store DIR or a MOUNTPOINT, not both") }
    }
}
