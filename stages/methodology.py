"""Stage `methodology`: compile the analysts' methodology file into an output JSON Schema and a rubric."""

from __future__ import annotations

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology import compiler as meth
from fundgrpo.params import MethodologyParams, load_params


def run(params: MethodologyParams) -> dict[str, dict]:
    """Check and compile the methodology; raises MethodologyError naming the problem."""
    m = meth.load(params.path)
    return {"output_schema": meth.output_schema(m), "rubric": meth.rubric(m)}


def main() -> None:
    def body() -> None:
        params = load_params().methodology
        compiled = run(params)
        with io.atomic_path(params.out_dir) as out:  # schema and rubric replace the old ones together
            out.mkdir()
            for name, obj in compiled.items():
                io.write_json(obj, out / f"{name}.json")
        r = compiled["rubric"]
        print(
            f"methodology: {r['name']} v{r['version']} ({r['language']}), {len(r['criteria'])} criteria, grades {r['grades']}"
        )

    run_stage("methodology", body)


if __name__ == "__main__":
    main()
