def floyd_warshall(path, N):
    """PolyBench floyd-warshall: shortest paths between every pair of nodes, in place (the
    k loop carries every dependence; i and j are parallel for each k)."""
    for k in range(N):
        for i in range(N):
            for j in range(N):
                if path[i, k] + path[k, j] < path[i, j]:
                    path[i, j] = path[i, k] + path[k, j]
