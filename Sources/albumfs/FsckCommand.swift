import AlbumCore
import AlbumFUSE

/// `albumfs fsck [--store DIR] [--repair]`: exit 0 when consistent, 1 when
/// problems were found (and, with --repair, fixed where no data is lost),
/// 2 when the check could not run.
struct FsckCommand {
    var store: String?
    var repair = false

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            switch argument {
            case "--repair": repair = true
            case _ where argument.hasPrefix("--store"): store = try reader.value(of: "--store", in: argument)
            default: throw .usage("unknown fsck argument \(argument)")
            }
        }
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = try storeLocation(store)
        let problems: [StoreChecker.Problem]
        do {
            problems = try StoreChecker(location: location).check(repair: repair)
        } catch {
            throw CommandFailure(.usage, describe(error))
        }
        for problem in problems {
            let action = problem.repair.map { (repair ? "repaired: " : "would ") + $0 } ?? "not repaired: \(problem.whyNotRepaired ?? "it cannot be repaired without losing data")"
            print("\(problem.description) — \(action)")
        }
        if problems.isEmpty {
            print("\(location.root): consistent")
            return ExitCode.success.rawValue
        }
        print("\(location.root): \(problems.count) problem\(problems.count == 1 ? "" : "s") found")
        return ExitCode.problemsFound.rawValue
    }
}
