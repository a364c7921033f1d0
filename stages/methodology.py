"""Stage `methodology`: compile the analysts' methodology file into an output JSON Schema and a rubric."""

from __future__ import annotations

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology import compiler as meth
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        params = load_params().methodology
        compiled = meth.compile_file(params.path)
        with io.atomic_path(params.out_dir) as out:  # schema and rubric replace the old ones together
            out.mkdir()
            for name, obj in compiled.items():
                io.write_json(obj, out / f"{name}.json")
        r = compiled["rubric"]
        print(
            f"methodology: {r['name']} v{r['version']} ({r['language']}), {len(r['criteria'])} criteria, "
            f"grades {r['grades']}"
        )

    run_stage("methodology", body)


if __name__ == "__main__":
    main()
