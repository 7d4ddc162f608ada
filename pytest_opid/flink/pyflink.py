"""PyFlink: the job a ``StreamExecutionEnvironment`` (or a ``StatementSet``) would submit, read
from Flink's own StreamGraph and hashed by pytest-opid's engine.

:func:`fingerprint_pyflink` asks PyFlink for the StreamGraph exactly as ``env.execute()`` builds
it (``StreamExecutionEnvironment._generate_stream_graph``: Python operator configuration,
PyFlink's chaining of Python functions, custom partition counts), without clearing the
environment's transformations, reads every attribute that decides an OperatorID or a chain
(:func:`read_stream_graph`) and computes the fingerprint with :func:`pytest_opid.flink.compute.
compute`. Flink only supplies the graph; the IDs and chains are ours (the tests compare them with
the JobGraph Flink builds, as a witness).

The graph is read on the JVM side by a small Java class (:data:`HELPER_SOURCE`), compiled on
first use with the JDK's compiler inside PyFlink's own JVM and cached on disk; it turns the
whole StreamGraph into one JSON text, fetched in a few py4j calls whatever the job's size. It
also undoes what PyFlink's preparation does to the environment (PyFlink's chaining optimizer
rewires the transformations in place), so fingerprinting neither consumes nor changes a job:
``env.execute()`` afterwards submits the same graph.

PyFlink is imported only when a PyFlink object is fingerprinted: :func:`register` recognises
one by its class's module name.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.flink.chaining import ChainingRule, flink_chaining
from pytest_opid.flink.compute import compute
from pytest_opid.io.registry import Frontend, register_frontend
from pytest_opid.model import (
    ChainingStrategy,
    Edge,
    ExchangeMode,
    Operator,
    Partitioner,
    RuntimeMode,
    SourceKind,
    Topology,
)
from pytest_opid.result import Fingerprint

__all__ = [
    "HELPER_SOURCE",
    "FlinkJvm",
    "StreamGraphReading",
    "batch_vertex_parallelism",
    "fingerprint_pyflink",
    "fingerprint_reading",
    "job_graph_vertices",
    "read_stream_graph",
    "register",
    "stream_graph",
    "topology_from_graph_json",
]

ACCEPTED = (
    "a PyFlink StreamExecutionEnvironment (the job env.execute() would submit), a DataStream "
    "(its environment's job) or a StatementSet (the job statement_set.execute() would submit)"
)

#: The Java side: one class, compiled on first use against the JVM's own class path.
HELPER_SOURCE = r"""
package pytestopid;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.*;

import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.client.program.PackagedProgram;
import org.apache.flink.client.program.PackagedProgramUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.OperatorIDPair;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamEdge;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import org.apache.flink.streaming.api.operators.SimpleOperatorFactory;
import org.apache.flink.streaming.api.operators.SourceOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.streaming.api.operators.legacy.YieldingOperatorFactory;
import org.apache.flink.streaming.runtime.partitioner.*;
import org.apache.flink.table.api.internal.StatementSetImpl;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;
import org.apache.flink.table.delegation.Executor;

/** pytest-opid's reader of Flink stream graphs (generated code: see pytest_opid.flink.pyflink). */
public final class OpidFlinkReader {
    public OpidFlinkReader() {}

    // -- the stream graph as JSON ------------------------------------------------------------

    public StringBuilder streamGraph(StreamGraph graph) throws Exception {
        Method configured = StreamNode.class.getDeclaredMethod("isParallelismConfigured");
        configured.setAccessible(true);
        List<StreamNode> nodes = new ArrayList<>(graph.getStreamNodes());
        nodes.sort(Comparator.comparingInt(StreamNode::getId));
        Map<StreamEdge, Integer> index = new IdentityHashMap<>();
        for (StreamNode node : nodes) {
            for (StreamEdge edge : node.getOutEdges()) {
                index.putIfAbsent(edge, index.size());
            }
        }
        StringBuilder out = new StringBuilder(1024 + 400 * nodes.size());
        out.append("{\"chaining\":").append(graph.isChainingEnabled());
        out.append(",\"differentMaxParallelism\":")
                .append(graph.isChainingOfOperatorsWithDifferentMaxParallelismEnabled());
        out.append(",\"jobType\":");
        str(out, String.valueOf(graph.getJobType()));
        out.append(",\"dynamic\":").append(graph.isDynamic());
        out.append(",\"nodes\":[");
        String sep = "";
        for (StreamNode node : nodes) {
            StreamOperatorFactory<?> factory = node.getOperatorFactory();
            out.append(sep).append("{\"id\":").append(node.getId());
            sep = ",";
            out.append(",\"name\":");
            str(out, node.getOperatorName());
            out.append(",\"parallelism\":").append(node.getParallelism());
            out.append(",\"maxParallelism\":").append(node.getMaxParallelism());
            out.append(",\"configured\":").append(configured.invoke(node));
            out.append(",\"slotSharingGroup\":");
            str(out, node.getSlotSharingGroup());
            out.append(",\"uid\":");
            str(out, node.getTransformationUID());
            out.append(",\"userHash\":");
            str(out, node.getUserHash());
            out.append(",\"strategy\":");
            str(out, factory == null ? null : String.valueOf(factory.getChainingStrategy()));
            String source = null;
            if (factory instanceof SourceOperatorFactory) {
                source = "new";
            } else if (factory != null && factory.isLegacySource()) {
                source = "legacy";
            }
            out.append(",\"source\":");
            str(out, source);
            out.append(",\"yielding\":").append(factory instanceof YieldingOperatorFactory);
            out.append(",\"operator\":");
            str(out, operatorClass(factory));
            out.append(",\"keyed\":").append(node.getStatePartitioners().length > 0);
            boolean chainedSource = false;
            try {
                chainedSource = StreamingJobGraphGenerator.isChainableSource(node, graph);
            } catch (RuntimeException e) {
                // not a source Flink would chain into its consumer
            }
            out.append(",\"chainedSource\":").append(chainedSource);
            out.append(",\"out\":[");
            String edgeSep = "";
            for (StreamEdge edge : node.getOutEdges()) {
                StreamPartitioner<?> partitioner = edge.getPartitioner();
                out.append(edgeSep).append("[").append(edge.getTargetId());
                edgeSep = ",";
                out.append(",").append(edge.getTypeNumber()).append(",");
                str(out, partitionerKind(partitioner));
                out.append(",");
                str(out, String.valueOf(edge.getExchangeMode()));
                out.append(",");
                str(out, partitioner == null ? null : partitioner.getClass().getSimpleName());
                out.append("]");
            }
            out.append("],\"in\":[");
            edgeSep = "";
            for (StreamEdge edge : node.getInEdges()) {
                Integer position = index.get(edge);
                out.append(edgeSep).append(position == null ? -1 : position);
                edgeSep = ",";
            }
            out.append("]}");
        }
        out.append("]}");
        return out;
    }

    private static String operatorClass(StreamOperatorFactory<?> factory) {
        if (factory == null) {
            return null;
        }
        if (factory instanceof SimpleOperatorFactory) {
            Object operator = ((SimpleOperatorFactory<?>) factory).getOperator();
            if (operator != null) {
                return operator.getClass().getName();
            }
        }
        return factory.getClass().getName();
    }

    private static String partitionerKind(StreamPartitioner<?> p) {
        if (p instanceof ForwardForConsecutiveHashPartitioner) {
            return "FORWARD_FOR_CONSECUTIVE_HASH";
        }
        if (p instanceof ForwardPartitioner) return "FORWARD";
        if (p instanceof KeyGroupStreamPartitioner) return "HASH";
        if (p instanceof RebalancePartitioner) return "REBALANCE";
        if (p instanceof RescalePartitioner) return "RESCALE";
        if (p instanceof ShufflePartitioner) return "SHUFFLE";
        if (p instanceof BroadcastPartitioner) return "BROADCAST";
        if (p instanceof GlobalPartitioner) return "GLOBAL";
        return "CUSTOM";
    }

    private static void str(StringBuilder out, String s) {
        if (s == null) {
            out.append("null");
            return;
        }
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF) || c == 0x2028 || c == 0x2029) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }

    // -- Flink's own JobGraph, the witness of the tests ----------------------------------------

    public StringBuilder jobGraph(StreamGraph graph, ClassLoader loader) throws Exception {
        JobGraph job = loader == null ? graph.getJobGraph() : graph.getJobGraph(loader, null);
        StringBuilder out = new StringBuilder("[");
        String sep = "";
        for (JobVertex vertex : job.getVerticesSortedTopologicallyFromSources()) {
            out.append(sep).append("{\"id\":");
            sep = ",";
            str(out, vertex.getID().toHexString());
            out.append(",\"name\":");
            str(out, vertex.getName());
            out.append(",\"parallelism\":").append(vertex.getParallelism());
            out.append(",\"maxParallelism\":").append(vertex.getMaxParallelism());
            out.append(",\"operators\":[");
            String opSep = "";
            for (OperatorIDPair pair : vertex.getOperatorIDs()) {
                out.append(opSep).append("[");
                opSep = ",";
                str(out, pair.getGeneratedOperatorID().toHexString());
                out.append(",");
                str(out, pair.getUserDefinedOperatorID().map(id -> id.toHexString()).orElse(null));
                out.append("]");
            }
            out.append("]}");
        }
        return out.append("]");
    }

    // -- leaving an environment as it was ----------------------------------------------------

    public Object capture(StreamExecutionEnvironment env) throws Exception {
        List<Object[]> saved = new ArrayList<>();
        save(env, saved);
        Field field = StreamExecutionEnvironment.class.getDeclaredField("transformations");
        field.setAccessible(true);
        @SuppressWarnings("unchecked")
        List<Transformation<?>> list = (List<Transformation<?>>) field.get(env);
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        Deque<Transformation<?>> todo = new ArrayDeque<>(list);
        while (!todo.isEmpty()) {
            Transformation<?> t = todo.pop();
            if (seen.add(t)) {
                save(t, saved);
                todo.addAll(t.getInputs());
            }
        }
        return saved;
    }

    private static void save(Object target, List<Object[]> saved) {
        Class<?> c = target.getClass();
        for (; c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers())) {
                    continue;
                }
                Object value;
                try {
                    f.setAccessible(true);
                    value = f.get(target);
                } catch (RuntimeException | IllegalAccessException e) {
                    continue;
                }
                Object copy = null;
                if (value instanceof Collection) {
                    copy = new ArrayList<>((Collection<?>) value);
                } else if (value instanceof Map) {
                    copy = new ArrayList<>(((Map<?, ?>) value).entrySet());
                    List<Object[]> entries = new ArrayList<>();
                    for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                        entries.add(new Object[] {e.getKey(), e.getValue()});
                    }
                    copy = entries;
                }
                saved.add(new Object[] {target, f, value, copy});
            }
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public void restore(Object token) throws Exception {
        for (Object[] entry : (List<Object[]>) token) {
            Object target = entry[0];
            Field f = (Field) entry[1];
            Object value = entry[2];
            Object copy = entry[3];
            try {
                if (f.get(target) != value) {
                    f.set(target, value);
                }
                if (value instanceof Collection) {
                    Collection c = (Collection) value;
                    List<Object> was = (List<Object>) copy;
                    if (!sameElements(c, was)) {
                        c.clear();
                        c.addAll(was);
                    }
                } else if (value instanceof Map) {
                    Map m = (Map) value;
                    List<Object[]> was = (List<Object[]>) copy;
                    boolean same = m.size() == was.size();
                    for (Object[] e : was) {
                        same = same && m.containsKey(e[0]) && m.get(e[0]) == e[1];
                    }
                    if (!same) {
                        m.clear();
                        for (Object[] e : was) {
                            m.put(e[0], e[1]);
                        }
                    }
                }
            } catch (UnsupportedOperationException | IllegalAccessException e) {
                // an immutable value: nothing can have changed it
            }
        }
    }

    private static boolean sameElements(Collection<?> now, List<Object> was) {
        if (now.size() != was.size()) {
            return false;
        }
        Iterator<?> it = now.iterator();
        for (Object o : was) {
            if (it.next() != o) {
                return false;
            }
        }
        return true;
    }

    // -- what statement_set.execute() would submit ---------------------------------------------

    @SuppressWarnings("unchecked")
    public Pipeline statementSetPipeline(Object statementSet) throws Exception {
        StatementSetImpl<?> set = (StatementSetImpl<?>) statementSet;
        Field envField = StatementSetImpl.class.getDeclaredField("tableEnvironment");
        envField.setAccessible(true);
        TableEnvironmentImpl tableEnv = (TableEnvironmentImpl) envField.get(set);
        List<?> operations = set.getOperations();
        if (operations.isEmpty()) {
            throw new IllegalStateException("the statement set holds no statements");
        }
        Method translate = TableEnvironmentImpl.class.getDeclaredMethod("translate", List.class);
        translate.setAccessible(true);
        List<Transformation<?>> transformations =
                (List<Transformation<?>>) translate.invoke(tableEnv, new ArrayList<>(operations));
        Field executorField = TableEnvironmentImpl.class.getDeclaredField("execEnv");
        executorField.setAccessible(true);
        Executor executor = (Executor) executorField.get(tableEnv);
        return executor.createPipeline(
                transformations,
                tableEnv.getConfig().getConfiguration(),
                "insert-into_pytest-opid",
                Collections.emptyList());
    }

    // -- what a jar's main would submit ------------------------------------------------------

    public static final class JarPipeline {
        private final PackagedProgram program;
        private final Pipeline pipeline;

        JarPipeline(PackagedProgram program, Pipeline pipeline) {
            this.program = program;
            this.pipeline = pipeline;
        }

        public Pipeline getPipeline() {
            return pipeline;
        }

        public ClassLoader getClassLoader() {
            return program.getUserCodeClassLoader();
        }

        public String getMainClassName() {
            return program.getMainClassName();
        }

        public void close() {
            program.close();
        }
    }

    public JarPipeline jarPipeline(String jar, String mainClass, String[] args, int parallelism)
            throws Exception {
        Configuration configuration = new Configuration();
        PackagedProgram.Builder builder =
                PackagedProgram.newBuilder()
                        .setJarFile(new File(jar))
                        .setArguments(args)
                        .setConfiguration(configuration);
        if (mainClass != null) {
            builder.setEntryPointClassName(mainClass);
        }
        PackagedProgram program = builder.build();
        try {
            Pipeline pipeline =
                    PackagedProgramUtils.getPipelineFromProgram(
                            program, configuration, parallelism, true);
            return new JarPipeline(program, pipeline);
        } catch (Exception | Error e) {
            program.close();
            throw e;
        }
    }

    public String describe(Throwable error) {
        StringBuilder out = new StringBuilder();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = error; t != null && seen.add(t); t = t.getCause()) {
            if (out.length() > 0) {
                out.append('\n');
            }
            out.append(t.getClass().getName()).append('\t');
            out.append(t.getMessage() == null ? "" : t.getMessage().replace('\n', '\r'));
        }
        return out.toString();
    }
}
"""

#: The helper class's name in :data:`HELPER_SOURCE`.
HELPER_CLASS = "pytestopid.OpidFlinkReader"
#: Characters fetched per py4j call: py4j answers through an 8 KiB buffer without TCP_NODELAY,
#: so a longer answer waits for a delayed ACK (~40 ms); JSON comes in pieces that fit it.
_CHUNK = 7500


# -- the JVM side -----------------------------------------------------------------------------


class FlinkJvm:
    """PyFlink's JVM (its py4j gateway) with pytest-opid's helper class loaded into it.

    One per gateway, built on first use: PyFlink starts its JVM once per Python process, so a
    test session shares one JVM and compiles (or loads from the cache) the helper once.
    """

    _instances: dict[int, FlinkJvm] = {}

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.jvm = gateway.jvm
        self.helper = self._load_helper()

    @classmethod
    def get(cls) -> FlinkJvm:
        """The helper on PyFlink's gateway (starting PyFlink's JVM if it is not running)."""
        from pyflink.java_gateway import get_gateway

        gateway = get_gateway()
        found = cls._instances.get(id(gateway))
        if found is None or found.gateway is not gateway:
            found = cls._instances[id(gateway)] = cls(gateway)
        return found

    # -- helper class ------------------------------------------------------------------------

    def _load_helper(self) -> Any:
        jvm = self.jvm
        system = jvm.java.lang.System
        flink_version = jvm.org.apache.flink.runtime.util.EnvironmentInformation.getVersion()
        key = hashlib.sha256(
            "\0".join(
                [HELPER_SOURCE, str(system.getProperty("java.version")), str(flink_version)]
            ).encode()
        ).hexdigest()[:20]
        classes = _cache_root() / f"flink-helper-{key}"
        class_file = classes.joinpath(*HELPER_CLASS.split(".")).with_suffix(".class")
        if not class_file.is_file():
            self._compile(classes)
        url = jvm.java.io.File(str(classes)).toURI().toURL()
        urls = self.gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = url
        parent = jvm.java.lang.Class.forName(
            "org.apache.flink.streaming.api.graph.StreamGraph"
        ).getClassLoader()
        loader = jvm.java.net.URLClassLoader(urls, parent)
        cls = loader.loadClass(HELPER_CLASS)
        constructor = cls.getDeclaredConstructor(self.gateway.new_array(jvm.java.lang.Class, 0))
        return constructor.newInstance(self.gateway.new_array(jvm.java.lang.Object, 0))

    def _compile(self, target: Path) -> None:
        """Compile the helper with the JDK compiler of PyFlink's JVM into ``target`` (through a
        temporary directory renamed into place, so concurrent sessions never see half a class)."""
        jvm = self.jvm
        compiler = jvm.javax.tools.ToolProvider.getSystemJavaCompiler()
        if compiler is None:
            raise OpidError(
                "pytest-opid reads Flink's stream graph with a small Java class it compiles on "
                "first use, and PyFlink's Java runtime "
                f"({jvm.java.lang.System.getProperty('java.home')}) has no compiler: run PyFlink "
                "on a JDK (JAVA_HOME pointing at a JDK 11+), not a JRE"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        source = work / "src" / (HELPER_CLASS.rsplit(".", 1)[1] + ".java")
        source.parent.mkdir(parents=True)
        source.write_text(HELPER_SOURCE, encoding="utf-8")
        out = work / "classes"
        out.mkdir()
        classpath = str(jvm.java.lang.System.getProperty("java.class.path"))
        args = ["-nowarn", "-proc:none", "-encoding", "UTF-8", "-cp", classpath]
        args += ["-d", str(out), str(source)]
        jargs = self.gateway.new_array(jvm.java.lang.String, len(args))
        for i, arg in enumerate(args):
            jargs[i] = arg
        errors = jvm.java.io.ByteArrayOutputStream()
        status = compiler.run(None, errors, errors, jargs)
        if status != 0:
            raise OpidError(
                "could not compile pytest-opid's Flink helper against this Flink: "
                + str(errors.toString())[:2000]
            )
        try:
            out.rename(target)
        except OSError:  # another session compiled it meanwhile
            if not target.is_dir():
                raise
        finally:
            _remove_tree(work)

    # -- reading -----------------------------------------------------------------------------

    def fetch(self, builder: Any) -> str:
        """The text of a JVM ``StringBuilder``, in pieces that avoid py4j's delayed ACKs."""
        size = builder.length()
        if size <= _CHUNK:
            return str(builder.toString())
        return "".join(
            str(builder.substring(start, min(start + _CHUNK, size)))
            for start in range(0, size, _CHUNK)
        )

    def stream_graph_json(self, j_graph: Any) -> dict[str, Any]:
        """The StreamGraph's nodes and edges, parsed (see :func:`topology_from_graph_json`)."""
        data: dict[str, Any] = json.loads(self.fetch(self.helper.streamGraph(j_graph)))
        return data

    def job_graph(self, j_graph: Any, class_loader: Any = None) -> list[dict[str, Any]]:
        """Flink's own JobGraph of a StreamGraph: vertices in topological order, each with id,
        name, parallelism, max parallelism and its (generated, user-defined) operator IDs."""
        vertices: list[dict[str, Any]] = json.loads(
            self.fetch(self.helper.jobGraph(j_graph, class_loader))
        )
        return vertices

    def describe(self, java_exception: Any) -> list[tuple[str, str]]:
        """A Java exception's chain as (class name, message) pairs, outermost first."""
        text = str(self.helper.describe(java_exception))
        pairs = []
        for line in text.split("\n"):
            name, _, message = line.partition("\t")
            pairs.append((name, message.replace("\r", "\n")))
        return pairs


def _cache_root() -> Path:
    base = os.environ.get("PYTEST_OPID_CACHE") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    root = root / "pytest-opid" if not os.environ.get("PYTEST_OPID_CACHE") else root
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".probe-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
        return root
    except OSError:
        return (
            Path(tempfile.gettempdir())
            / f"pytest-opid-{os.getuid() if hasattr(os, 'getuid') else 0}"
        )


def _remove_tree(path: Path) -> None:
    if not path.exists():
        return
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink()
    path.rmdir()


# -- from JSON to a topology ------------------------------------------------------------------

_PARTITIONERS = {p.value: p for p in Partitioner}
_EXCHANGE_MODES = {m.value: m for m in ExchangeMode}
_STRATEGIES = {s.value: s for s in ChainingStrategy}
_SOURCES = {"new": SourceKind.NEW, "legacy": SourceKind.LEGACY}


@dataclass(frozen=True)
class StreamGraphReading:
    """A StreamGraph read into a :class:`Topology`. The topology numbers its operators 1, 2,
    ... in the order of Flink's node ids (Flink's ids come from a JVM-wide counter, so they
    depend on what else the JVM built; the order, which is all the hash uses, does not);
    ``flink_ids`` maps our numbers back to Flink's. ``operators`` holds each operator's class,
    for messages."""

    topology: Topology
    flink_ids: Mapping[int, int]
    operators: Mapping[int, str | None]
    #: per topology edge, Flink's partitioner class (``ForwardPartitioner``,
    #: ``ForwardForUnspecifiedPartitioner``, ...), which BATCH parallelism depends on
    partitioner_classes: tuple[str | None, ...] = ()
    #: whether the graph is dynamic (``BATCH`` under the adaptive batch scheduler)
    dynamic: bool = False
    #: how much the table planner's ExecNode numbers in operator names were lowered by (see
    #: :func:`topology_from_graph_json`)
    exec_node_offset: int = 0


def topology_from_graph_json(data: Mapping[str, Any]) -> StreamGraphReading:
    """The topology of a StreamGraph as the helper writes it (:meth:`FlinkJvm.stream_graph_json`).

    Flink keeps a node's outputs and its inputs in two lists; a topology keeps one edge list
    whose order gives both. Edges are appended to both lists when Flink creates them, so an
    order agreeing with every list exists; we find it by merging the lists (a topological sort
    of "comes before in some node's list")."""
    nodes = data["nodes"]
    if not nodes:
        raise OpidError("the stream graph has no operators")
    number = {node["id"]: i + 1 for i, node in enumerate(nodes)}
    edges: list[tuple[int, int, list[Any]]] = []  # (source id, position in its outs, entry)
    for node in nodes:
        for position, out in enumerate(node["out"]):
            edges.append((node["id"], position, out))
    chained = [n for n in nodes if n["chainedSource"] and _inputs(nodes, n) > 1]
    if chained:
        raise OpidError(
            f"Flink chains source {chained[0]['name']!r} into a multiple-input operator (the "
            "table planner's multiple-input optimisation of batch jobs), a chain pytest-opid's "
            "engine does not model; set table.optimizer.multiple-input-enabled: false"
        )
    order = _edge_order(nodes, len(edges))
    dynamic = bool(data.get("dynamic"))
    names, offset = _planner_names(nodes)
    operators = [
        Operator(
            id=number[node["id"]],
            name=names[i],
            parallelism=_parallelism(node["parallelism"]),
            max_parallelism=_parallelism(node["maxParallelism"]),
            slot_sharing_group=node["slotSharingGroup"],
            chaining_strategy=None if node["strategy"] is None else _STRATEGIES[node["strategy"]],
            uid=node["uid"],
            uid_hash=node["userHash"],
            source=_SOURCES.get(node["source"]) if node["source"] else None,
            yielding=bool(node["yielding"]),
            parallelism_configured=bool(node["configured"]),
        )
        for i, node in enumerate(nodes)
    ]
    topology_edges = []
    classes = []
    for e in order:
        source_id, _, (target, type_number, kind, mode, partitioner_class) = edges[e]
        classes.append(partitioner_class)
        exchange = _EXCHANGE_MODES.get(mode, ExchangeMode.UNDEFINED)
        if kind == "FORWARD_FOR_CONSECUTIVE_HASH":
            # Flink chains it whatever the exchange mode (in a dynamic graph, the only kind
            # that has it): a FORWARD edge that is not BATCH says the same to our rule.
            if not dynamic:
                raise DocumentError(
                    "a ForwardForConsecutiveHashPartitioner outside a dynamic (adaptive batch) "
                    "graph, which Flink itself rejects when it builds the JobGraph"
                )
            kind = "FORWARD"
            if exchange is ExchangeMode.BATCH:
                exchange = ExchangeMode.UNDEFINED
        topology_edges.append(
            Edge(
                number[source_id],
                number[target],
                _PARTITIONERS[kind],
                type_number,
                exchange,
            )
        )
    mode = RuntimeMode.BATCH if data.get("jobType") == "BATCH" else RuntimeMode.STREAMING
    topology = Topology(
        operators,
        topology_edges,
        chaining_enabled=bool(data["chaining"]),
        chain_different_max_parallelism=bool(data["differentMaxParallelism"]),
        runtime_mode=mode,
    )
    return StreamGraphReading(
        topology,
        {number[n["id"]]: n["id"] for n in nodes},
        {number[n["id"]]: n["operator"] for n in nodes},
        tuple(classes),
        dynamic,
        offset,
    )


_EXEC_NODE = re.compile(r"\[(\d+)\]")
_PLANNER = ("org.apache.flink.table.",)


def _planner_names(nodes: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """Operator names, with the table planner's ExecNode numbers (``Calc[27]``) counted from 1.

    The planner numbers ExecNodes with a JVM-wide counter, so the same SQL job is ``Calc[3]``
    in a fresh JVM (a deployed job's client) and ``Calc[27]`` after other jobs were planned
    in the same JVM (a test session). In a job with planner operators we lower every ``[N]``
    in a name (the planner's sources and sinks carry them too) so that the smallest is 1, as
    a fresh JVM numbers them; names never decide an ID."""
    names = [n["name"] for n in nodes]
    if not any((n.get("operator") or "").startswith(_PLANNER) for n in nodes):
        return names, 0
    found = [int(m) for name in names for m in _EXEC_NODE.findall(name)]
    if not found:
        return names, 0
    offset = min(found) - 1
    return [_EXEC_NODE.sub(lambda m: f"[{int(m.group(1)) - offset}]", name) for name in names], (
        offset
    )


def fingerprint_reading(
    reading: StreamGraphReading, chaining: ChainingRule | None = None
) -> Fingerprint:
    """The fingerprint of a StreamGraph reading: pytest-opid's engine
    (:func:`~pytest_opid.flink.compute.compute`), with job vertex parallelism in ``BATCH``
    mode decided as Flink's JobGraph generation decides it for this graph
    (:func:`batch_vertex_parallelism`)."""
    fp = compute(reading.topology, chaining or flink_chaining)
    if reading.topology.runtime_mode is RuntimeMode.BATCH:
        fp = batch_vertex_parallelism(reading, fp)
    return fp


def batch_vertex_parallelism(reading: StreamGraphReading, fp: Fingerprint) -> Fingerprint:
    """Job vertex parallelism and max parallelism of a ``BATCH`` job, as Flink 2.3's
    ``StreamingJobGraphGenerator.setVertexParallelismsForDynamicGraphIfNecessary`` sets them.

    A static graph (batch without the adaptive batch scheduler) keeps each chain head's
    parallelism. In a dynamic graph a vertex none of whose operators had its parallelism
    configured gets -1 (decided at run time); vertices joined by a non-chained edge with a
    plain ``ForwardPartitioner`` form forward groups (transitively; Flink turns the default
    ``ForwardForUnspecifiedPartitioner`` into ``rescale`` between vertices, which joins no
    group), and a group with a configured vertex gives its parallelism to all of its vertices,
    and the smallest positive max parallelism among them to all. Unlike a topology document, a
    StreamGraph reading knows each edge's partitioner class, so this is exact."""
    topology = reading.topology
    ops = topology.operators
    vertex_of: dict[int, int] = {}  # operator id -> vertex position
    for position, vertex in enumerate(fp.job_vertices):
        for node in vertex.nodes:
            vertex_of[node] = position
    heads = [topology.operator(v.nodes[-1]) for v in fp.job_vertices]
    parallelism = [head.parallelism for head in heads]
    max_parallelism = [head.max_parallelism for head in heads]
    if reading.dynamic:
        configured = [False] * len(heads)
        for op in ops:
            if op.parallelism_configured:
                configured[vertex_of[op.id]] = True
        parallelism = [p if c else -1 for p, c in zip(parallelism, configured, strict=True)]
        parent = list(range(len(heads)))

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for edge, cls in zip(topology.edges, reading.partitioner_classes, strict=True):
            up, down = vertex_of[edge.source], vertex_of[edge.target]
            if up != down and cls == "ForwardPartitioner":
                parent[root(up)] = root(down)
        group_parallelism: dict[int, int] = {}
        group_max: dict[int, int] = {}
        for v in range(len(heads)):
            r = root(v)
            if configured[v]:
                group_parallelism.setdefault(r, parallelism[v])
            if max_parallelism[v] > 0:
                group_max[r] = min(group_max.get(r, max_parallelism[v]), max_parallelism[v])
        for v in range(len(heads)):
            r = root(v)
            parallelism[v] = group_parallelism.get(r, parallelism[v])
            max_parallelism[v] = group_max.get(r, max_parallelism[v])
    vertices = tuple(
        v._replace(parallelism=p, max_parallelism=m)
        for v, p, m in zip(fp.job_vertices, parallelism, max_parallelism, strict=True)
    )
    return replace(fp, job_vertices=vertices)


def _parallelism(value: int) -> int:
    return value if value > 0 else -1


def _inputs(nodes: Sequence[Mapping[str, Any]], source: Mapping[str, Any]) -> int:
    target = source["out"][0][0] if source["out"] else None
    return next((len(n["in"]) for n in nodes if n["id"] == target), 0)


def _edge_order(nodes: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """One order of all edges that keeps every node's out-list and in-list order."""
    after: list[list[int]] = [[] for _ in range(count)]
    indegree = [0] * count
    first = 0
    chains: list[list[int]] = []
    for node in nodes:
        outs = list(range(first, first + len(node["out"])))
        first += len(node["out"])
        chains.append(outs)
    for node in nodes:
        ins = node["in"]
        if any(not 0 <= e < count for e in ins):
            raise DocumentError(f"operator {node['name']!r} has an input edge no node outputs")
        chains.append(ins)
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            after[a].append(b)
            indegree[b] += 1
    # Kahn's algorithm, smallest edge number first: among the edges free to go next, the one
    # whose source comes first.
    ready = [e for e in range(count) if indegree[e] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        e = heapq.heappop(ready)
        order.append(e)
        for f in after[e]:
            indegree[f] -= 1
            if indegree[f] == 0:
                heapq.heappush(ready, f)
    if len(order) != count:
        raise DocumentError(
            "the stream graph's input and output edge lists disagree on the order of its edges"
        )
    return order


def read_stream_graph(j_graph: Any) -> StreamGraphReading:
    """Read a Java ``StreamGraph`` (a py4j object) into a topology."""
    return topology_from_graph_json(FlinkJvm.get().stream_graph_json(j_graph))


# -- from PyFlink objects to a StreamGraph ----------------------------------------------------


@contextmanager
def stream_graph(obj: Any) -> Iterator[Any]:
    """The Java StreamGraph that ``obj.execute()`` would submit, for the ``with`` block; the
    environment is left exactly as it was afterwards. ``obj`` is a PyFlink
    ``StreamExecutionEnvironment``, a ``DataStream`` (its environment) or a ``StatementSet``."""
    kind = _kind(obj)
    jvm = FlinkJvm.get()
    if kind == "statement_set":
        try:
            j_graph = jvm.helper.statementSetPipeline(obj._j_statement_set)
        except Exception as exc:
            raise _java_error(jvm, exc, "the statement set") from None
        yield j_graph
        return
    env = obj.get_execution_environment() if kind == "datastream" else obj
    j_env = env._j_stream_execution_environment
    if j_env.getTransformations().isEmpty():
        raise OpidError(
            "the StreamExecutionEnvironment holds no operators, so env.execute() would fail "
            '("No operators defined in streaming topology"): build the pipeline first'
        )
    token = jvm.helper.capture(j_env)
    try:
        try:
            j_graph = env._generate_stream_graph(clear_transformations=False)
        except Exception as exc:
            raise _java_error(jvm, exc, "the environment") from None
        yield j_graph
    finally:
        jvm.helper.restore(token)


def _kind(obj: Any) -> str:
    module = type(obj).__module__ or ""
    name = type(obj).__name__
    if module.startswith("pyflink.datastream") and hasattr(obj, "_j_stream_execution_environment"):
        return "env"
    if module.startswith("pyflink.datastream") and hasattr(obj, "get_execution_environment"):
        return "datastream"
    if module.startswith("pyflink.table") and hasattr(obj, "_j_statement_set"):
        return "statement_set"
    hint = ""
    if module.startswith("pyflink.table") and "TableEnvironment" in name:
        hint = (
            "; a table environment holds no job: fingerprint t_env.create_statement_set() "
            "with the INSERTs added, or the StreamExecutionEnvironment after "
            "statement_set.attach_as_datastream() or t_env.to_data_stream(table)"
        )
    elif module.startswith("pyflink.table") and name == "Table":
        hint = "; a Table is no job until it is written: add it to a statement set"
    raise TypeError(f"pytest_opid.fingerprint() accepts {ACCEPTED}; got {module}.{name}{hint}")


def _java_error(jvm: FlinkJvm, exc: Exception, what: str) -> OpidError:
    java = getattr(exc, "java_exception", None)
    if java is None:
        return OpidError(f"Flink could not build the stream graph of {what}: {exc}")
    chain = jvm.describe(java)
    return OpidError(f"Flink could not build the stream graph of {what}: {root_message(chain)}")


def root_message(chain: Sequence[tuple[str, str]]) -> str:
    """The most telling message of a Java exception chain, on one line: the innermost one
    that says something (wrappers like InvocationTargetException say nothing)."""
    for name, message in reversed(chain):
        first = message.strip().split("\n", 1)[0].strip()
        if first:
            return f"{first} ({name.rsplit('.', 1)[-1]})"
    return chain[0][0] if chain else "unknown error"


# -- the frontend -----------------------------------------------------------------------------


def fingerprint_pyflink(obj: Any, chaining: ChainingRule | None = None) -> Fingerprint:
    """The fingerprint of the job a PyFlink environment, DataStream or StatementSet would
    submit, computed by pytest-opid's engine from Flink's StreamGraph."""
    with stream_graph(obj) as j_graph:
        reading = read_stream_graph(j_graph)
    return fingerprint_reading(reading, chaining)


def job_graph_vertices(obj: Any) -> tuple[StreamGraphReading, list[dict[str, Any]]]:
    """Our reading of ``obj``'s StreamGraph and Flink's own JobGraph of the same graph (read
    first, then handed to Flink): what the tests compare."""
    jvm = FlinkJvm.get()
    with stream_graph(obj) as j_graph:
        reading = read_stream_graph(j_graph)
        vertices = jvm.job_graph(j_graph)
    return reading, vertices


def _is_pyflink(obj: Any) -> bool:
    # By module name, without importing PyFlink: every PyFlink object comes here, and the
    # ones that are no job get a TypeError saying which are.
    return (type(obj).__module__ or "").startswith("pyflink.")


def register() -> None:
    """Register the PyFlink frontend (the ``pyflink`` entry point of ``pytest_opid.engines``)."""
    register_frontend(Frontend("pyflink", _is_pyflink, fingerprint_pyflink, ACCEPTED))
